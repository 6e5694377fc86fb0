#include "lib/core/device_buffer.h"

#include <string>

namespace resident::detail {

void* device_allocate(std::size_t bytes, const char* what, const char* file, int line) {
  if (bytes == 0) return nullptr;
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, bytes);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free allocation error
    throw Error(std::string("cudaMalloc of ") + std::to_string(bytes) + " bytes for " + what,
                cudaGetErrorName(status), cudaGetErrorString(status), file, line);
  }
  return ptr;
}

void device_free(void* ptr) noexcept {
  if (ptr != nullptr) (void)cudaFree(ptr);
}

}  // namespace resident::detail
