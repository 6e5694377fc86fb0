// Driver API functions fetched through the runtime (cudaGetDriverEntryPointByVersion)
// instead of linking libcuda: binaries then start on machines without a driver, where the
// GPU tests skip instead of failing to load.
#pragma once

#include <cuda.h>

#include <string>

namespace resident {

// The driver's `symbol` (e.g. "cuInit") as ABI version `cuda_version`, or nullptr when no
// driver is present or the symbol is unknown.
void* driver_symbol(const char* symbol, unsigned cuda_version = 12000) noexcept;

template <class Fn>
Fn* driver_function(const char* symbol, unsigned cuda_version = 12000) noexcept {
  return reinterpret_cast<Fn*>(driver_symbol(symbol, cuda_version));
}

// "CUDA_ERROR_INVALID_DEVICE" for a driver code, or "CUresult <n>" without a driver.
std::string driver_error_name(CUresult code);
std::string driver_error_text(CUresult code);

}  // namespace resident
