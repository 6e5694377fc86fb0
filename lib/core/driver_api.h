// Driver API functions fetched through the runtime (cudaGetDriverEntryPointByVersion)
// instead of linking libcuda: binaries then start on machines without a driver, where the
// GPU tests skip instead of failing to load.
#pragma once

#include <cuda.h>

#include <string>

#include "kernels/core/error.h"

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

namespace detail {
[[noreturn]] void throw_cu_error(CUresult code, const char* call, const char* file, int line);
}  // namespace detail

}  // namespace resident

// CUDA driver API call (a function fetched with driver_function): throws resident::Error naming
// the call, the driver's name and text for the code, and the file:line of the check.
#define RESIDENT_CU_CHECK(call)                                                     \
  do {                                                                              \
    const CUresult resident_status_ = (call);                                       \
    if (resident_status_ != CUDA_SUCCESS)                                           \
      ::resident::detail::throw_cu_error(resident_status_, #call, __FILE__, __LINE__); \
  } while (0)
