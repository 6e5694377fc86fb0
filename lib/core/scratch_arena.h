// ScratchArena: one device allocation made at construction, handed out as 256-byte aligned
// sub-buffers (CUB temp storage, activations, saved tensors). Nothing is allocated after
// construction; asking for more than is left throws, naming the request and what is left.
//
//   ScratchPlan plan;                      // size the arena before building it
//   plan.add<float>(batch * width);        // each add rounds up to the alignment
//   plan.add_bytes(cub_temp_bytes);
//   ScratchArena arena(plan.bytes());
//   float* act = arena.take<float>(batch * width);
#pragma once

#include <cstddef>

#include "lib/core/device_buffer.h"

namespace resident {

inline constexpr std::size_t kScratchAlignment = 256;

constexpr std::size_t align_up(std::size_t bytes, std::size_t alignment = kScratchAlignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

class ScratchPlan {
 public:
  ScratchPlan& add_bytes(std::size_t bytes) {
    bytes_ += align_up(bytes);
    return *this;
  }
  template <class T>
  ScratchPlan& add(std::size_t count) {
    return add_bytes(count * sizeof(T));
  }
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  std::size_t bytes_ = 0;
};

class ScratchArena {
 public:
  explicit ScratchArena(std::size_t capacity_bytes);

  // A 256-byte aligned region of `bytes` bytes (nullptr when bytes == 0).
  void* take_bytes(std::size_t bytes);
  template <class T>
  T* take(std::size_t count) {
    return static_cast<T*>(take_bytes(count * sizeof(T)));
  }
  // Hands the whole arena out again (the caller guarantees no kernel still uses it).
  void reset() noexcept { used_ = 0; }

  std::size_t capacity() const noexcept { return storage_.bytes(); }
  std::size_t used() const noexcept { return used_; }

 private:
  DeviceBuffer<std::byte> storage_;
  std::size_t used_ = 0;
};

}  // namespace resident
