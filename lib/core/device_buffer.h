// DeviceBuffer<T>: a move-only owner of one cudaMalloc'd array. Allocation happens at
// construction only (never on a hot path); the destructor frees and never throws.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/core/error.h"

namespace resident {

namespace detail {
// cudaMalloc that throws an Error naming the requested size on failure.
void* device_allocate(std::size_t bytes, const char* what, const char* file, int line);
void device_free(void* ptr) noexcept;
}  // namespace detail

template <class T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "DeviceBuffer holds trivially copyable types");

 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count)
      : ptr_(static_cast<T*>(
            detail::device_allocate(count * sizeof(T), "DeviceBuffer", __FILE__, __LINE__))),
        count_(count) {}
  ~DeviceBuffer() { detail::device_free(ptr_); }

  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      detail::device_free(ptr_);
      ptr_ = std::exchange(other.ptr_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }

  T* data() noexcept { return ptr_; }
  const T* data() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return count_; }
  std::size_t bytes() const noexcept { return count_ * sizeof(T); }
  bool empty() const noexcept { return count_ == 0; }
  std::span<T> view() noexcept { return {ptr_, count_}; }
  std::span<const T> view() const noexcept { return {ptr_, count_}; }

  // Setup/test helpers: blocking copies, visible to the audit. Never call them on a hot path.
  // Both wait for the whole device: a plain cudaMemcpy is not ordered with work on
  // non-blocking streams (every resident stream is one), and a pageable upload may return
  // before its DMA lands.
  void upload(std::span<const T> host) {
    if (host.size() != count_)
      throw Error("DeviceBuffer::upload", "size mismatch",
                  std::to_string(host.size()) + " host elements into a buffer of " +
                      std::to_string(count_),
                  __FILE__, __LINE__);
    RESIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    RESIDENT_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice));
    RESIDENT_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    RESIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    RESIDENT_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* ptr_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace resident
