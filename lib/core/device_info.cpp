#include "lib/core/device_info.h"

#include <cuda_runtime_api.h>

#include "kernels/core/error.h"

namespace resident {

std::optional<DeviceInfo> probe_device(std::string* reason) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    if (reason)
      *reason = std::string("no CUDA device: ") + cudaGetErrorName(status) + " (" +
                cudaGetErrorString(status) + ")";
    return std::nullopt;
  }
  if (count == 0) {
    if (reason) *reason = "no CUDA device: 0 devices found";
    return std::nullopt;
  }
  DeviceInfo info;
  RESIDENT_CUDA_CHECK(cudaGetDevice(&info.ordinal));
  cudaDeviceProp prop{};
  RESIDENT_CUDA_CHECK(cudaGetDeviceProperties(&prop, info.ordinal));
  info.name = prop.name;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  info.global_memory_bytes = prop.totalGlobalMem;
  RESIDENT_CUDA_CHECK(cudaDriverGetVersion(&info.driver_version));
  RESIDENT_CUDA_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
  if (cudaDeviceGetAttribute(&info.sm_clock_khz, cudaDevAttrClockRate, info.ordinal) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    info.sm_clock_khz = 0;
  }
  return info;
}

std::string version_string(int cuda_version) {
  return std::to_string(cuda_version / 1000) + "." + std::to_string(cuda_version % 1000 / 10);
}

}  // namespace resident
