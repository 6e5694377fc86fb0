// ScalarReadback<T>: the only sanctioned way a hot path returns a number to the host.
// One pinned host slot of at most 8 bytes and one event. enqueue() issues a single
// <= 8-byte device-to-host copy and records the event on the stream; wait() blocks on that
// event (the one host synchronization of the readback) and returns the value.
#pragma once

#include <cuda_runtime_api.h>

#include <type_traits>
#include <utility>

#include "kernels/core/error.h"

namespace resident {

namespace detail {
void* pinned_slot_allocate(std::size_t bytes);
void pinned_slot_free(void* ptr) noexcept;
}  // namespace detail

template <class T>
class ScalarReadback {
  static_assert(sizeof(T) <= 8, "ScalarReadback carries at most 8 bytes");
  static_assert(std::is_trivially_copyable_v<T>, "ScalarReadback carries a trivially copyable T");

 public:
  ScalarReadback() : slot_(static_cast<T*>(detail::pinned_slot_allocate(sizeof(T)))) {
    try {
      RESIDENT_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    } catch (...) {
      detail::pinned_slot_free(slot_);
      throw;
    }
  }
  ~ScalarReadback() {
    if (done_ != nullptr) (void)cudaEventDestroy(done_);
    detail::pinned_slot_free(slot_);
  }
  ScalarReadback(const ScalarReadback&) = delete;
  ScalarReadback& operator=(const ScalarReadback&) = delete;
  ScalarReadback(ScalarReadback&& other) noexcept
      : slot_(std::exchange(other.slot_, nullptr)), done_(std::exchange(other.done_, nullptr)) {}
  ScalarReadback& operator=(ScalarReadback&&) = delete;

  // Queues the copy of *device_value behind the work already on `stream`.
  void enqueue(const T* device_value, cudaStream_t stream) {
    RESIDENT_CUDA_CHECK(
        cudaMemcpyAsync(slot_, device_value, sizeof(T), cudaMemcpyDeviceToHost, stream));
    RESIDENT_CUDA_CHECK(cudaEventRecord(done_, stream));
  }
  // Blocks until the queued copy has landed and returns it.
  T wait() {
    RESIDENT_CUDA_CHECK(cudaEventSynchronize(done_));
    return *slot_;
  }

 private:
  T* slot_ = nullptr;
  cudaEvent_t done_ = nullptr;
};

}  // namespace resident
