#include "lib/core/driver_api.h"

#include <cuda_runtime_api.h>

namespace resident {

void* driver_symbol(const char* symbol, unsigned cuda_version) noexcept {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(symbol, &fn, cuda_version, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return fn;
}

std::string driver_error_name(CUresult code) {
  static auto* get_name = driver_function<CUresult(CUresult, const char**)>("cuGetErrorName");
  const char* name = nullptr;
  if (get_name != nullptr && get_name(code, &name) == CUDA_SUCCESS && name != nullptr) return name;
  return "CUresult " + std::to_string(static_cast<int>(code));
}

std::string driver_error_text(CUresult code) {
  static auto* get_text = driver_function<CUresult(CUresult, const char**)>("cuGetErrorString");
  const char* text = nullptr;
  if (get_text != nullptr && get_text(code, &text) == CUDA_SUCCESS && text != nullptr) return text;
  return "";
}

namespace detail {

void throw_cu_error(CUresult code, const char* call, const char* file, int line) {
  throw Error(call, driver_error_name(code), driver_error_text(code), file, line);
}

}  // namespace detail
}  // namespace resident
