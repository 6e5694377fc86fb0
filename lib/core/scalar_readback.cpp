#include "lib/core/scalar_readback.h"

namespace resident::detail {

void* pinned_slot_allocate(std::size_t bytes) {
  void* ptr = nullptr;
  // Pinned, not mapped: the copy into it is an ordinary D2H memcpy that the audit sees.
  RESIDENT_CUDA_CHECK(cudaHostAlloc(&ptr, bytes, cudaHostAllocDefault));
  return ptr;
}

void pinned_slot_free(void* ptr) noexcept {
  if (ptr != nullptr) (void)cudaFreeHost(ptr);
}

}  // namespace resident::detail
