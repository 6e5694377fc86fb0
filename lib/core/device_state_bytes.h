// Device state <-> bytes, for checkpoints of objects that own several DeviceBuffers (replay
// buffers, environments). Setup/checkpoint-phase calls: they copy and synchronize.
//
// Format: for each buffer in the owner's fixed order, u64 element count, u64 element size, then
// the elements (little-endian, as in memory). The reader checks every count and element size
// against the buffer it fills and that no byte is left over, and gathers everything on the host
// before anything is uploaded: a mismatched state changes nothing.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "lib/core/device_buffer.h"
#include "kernels/core/error.h"

namespace resident {

class DeviceStateWriter {
 public:
  template <class T>
  DeviceStateWriter& add(const DeviceBuffer<T>& buffer) {
    return add_host(std::span<const T>(buffer.download()));
  }
  template <class T>
  DeviceStateWriter& add_host(std::span<const T> values) {
    const std::uint64_t header[2] = {values.size(), sizeof(T)};
    append(header, sizeof(header));
    append(values.data(), values.size_bytes());
    return *this;
  }
  std::vector<std::uint8_t> take() { return std::move(bytes_); }

 private:
  void append(const void* data, std::size_t n) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }
  std::vector<std::uint8_t> bytes_;
};

// Reads what DeviceStateWriter wrote, into the same buffers in the same order. `owner` names the
// object in errors ("GpuReplayBuffer::load_state"). Nothing reaches the device (or changes on the
// host) until commit(), so an owner can stage its state, other owners theirs, and all commit
// only once every one of them has passed its checks.
class DeviceStateReader {
 public:
  DeviceStateReader(std::span<const std::uint8_t> bytes, std::string owner)
      : bytes_(bytes), owner_(std::move(owner)) {}

  // Stages the next record for `buffer` (checked now, uploaded by commit()).
  template <class T>
  DeviceStateReader& into(DeviceBuffer<T>& buffer, const char* name) {
    std::vector<T> values = next<T>(buffer.size(), name);
    uploads_.push_back([&buffer, values = std::move(values)] { buffer.upload(values); });
    return *this;
  }
  // A host-side action (e.g. setting a host counter) run by commit() after the uploads before it.
  DeviceStateReader& then(std::function<void()> action) {
    uploads_.push_back(std::move(action));
    return *this;
  }
  // The next record as host values (exactly `count` of them).
  template <class T>
  std::vector<T> next(std::size_t count, const char* name) {
    std::uint64_t header[2];
    take(header, sizeof(header), name);
    if (header[0] != count || header[1] != sizeof(T))
      throw Error(owner_, "state mismatch",
                  std::string(name) + " has " + std::to_string(header[0]) + " elements of " +
                      std::to_string(header[1]) + " bytes, this object needs " +
                      std::to_string(count) + " of " + std::to_string(sizeof(T)),
                  __FILE__, __LINE__);
    std::vector<T> values(count);
    take(values.data(), count * sizeof(T), name);
    return values;
  }
  // Checks that every byte was read (call it last when staging; commit() calls it too).
  void check_consumed() const {
    if (offset_ != bytes_.size())
      throw Error(owner_, "state mismatch",
                  std::to_string(bytes_.size() - offset_) + " bytes left over after the last record",
                  __FILE__, __LINE__);
  }
  // Uploads all staged records and runs the staged actions, in order.
  void commit() {
    check_consumed();
    for (auto& upload : uploads_) upload();
    uploads_.clear();
  }

 private:
  void take(void* out, std::size_t n, const char* name) {
    if (bytes_.size() - offset_ < n)
      throw Error(owner_, "state mismatch", std::string("truncated at ") + name, __FILE__, __LINE__);
    if (n != 0) std::memcpy(out, bytes_.data() + offset_, n);
    offset_ += n;
  }

  std::span<const std::uint8_t> bytes_;
  std::string owner_;
  std::size_t offset_ = 0;
  std::vector<std::function<void()>> uploads_;
};

}  // namespace resident
