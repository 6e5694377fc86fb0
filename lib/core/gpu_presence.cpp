#include "lib/core/gpu_presence.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>

#include "lib/core/device_info.h"

namespace resident {

namespace {

std::string cuda_error_words(int status) {
  const auto error = static_cast<cudaError_t>(status);
  return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024"
// -> "550.54.14": the first word that starts with a digit and holds a '.'.
std::string module_version(const std::string& line) {
  std::istringstream words(line);
  std::string word;
  while (words >> word)
    if (!word.empty() && word[0] >= '0' && word[0] <= '9' && word.find('.') != std::string::npos)
      return word;
  return {};
}

}  // namespace

DriverPresence probe_driver() {
  DriverPresence driver;
  std::ifstream version("/proc/driver/nvidia/version");
  if (version) {
    driver.kernel_module = true;
    std::string line;
    std::getline(version, line);
    driver.kernel_module_version = module_version(line);
  }
  if (void* library = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    driver.user_library = true;
    dlclose(library);
  }
  return driver;
}

std::string describe_gpu_absence(int status, int device_count, const DriverPresence& driver,
                                 int runtime_version) {
  if (status == cudaSuccess && device_count > 0) return {};
  if (!driver.kernel_module && !driver.user_library)
    return "no NVIDIA GPU found (no driver loaded)";
  const std::string module = driver.kernel_module_version.empty()
                                 ? std::string("the NVIDIA kernel driver")
                                 : "NVIDIA kernel driver " + driver.kernel_module_version;
  if (status == cudaSuccess || status == cudaErrorNoDevice) {
    std::string reason = "no NVIDIA GPU found";
    if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr)
      reason += std::string(" (CUDA_VISIBLE_DEVICES=\"") + visible + "\")";
    return reason;
  }
  if (status == cudaErrorInsufficientDriver) {
    if (!driver.user_library)
      return "no usable NVIDIA GPU: " + module +
             " is loaded but its user-space library libcuda.so.1 is not installed (" +
             cuda_error_words(status) + ")";
    if (!driver.kernel_module)
      return "no NVIDIA GPU found (libcuda.so.1 is installed but no NVIDIA kernel driver is "
             "loaded)";
    return (driver.kernel_module_version.empty()
                ? std::string("the NVIDIA driver")
                : "NVIDIA driver " + driver.kernel_module_version) +
           " is too old for CUDA runtime " + version_string(runtime_version) + " (" +
           cuda_error_words(status) + ")";
  }
  return "no usable NVIDIA GPU: cudaGetDeviceCount failed (" + cuda_error_words(status) + ")";
}

const std::string& gpu_absence_reason() {
  static const std::string reason = [] {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    (void)cudaGetLastError();
    int runtime_version = 0;
    if (cudaRuntimeGetVersion(&runtime_version) != cudaSuccess) (void)cudaGetLastError();
    std::string absent = describe_gpu_absence(status, count, probe_driver(), runtime_version);
    if (!absent.empty()) return absent;
    // A device is listed: the full probe also reads its properties, which fails on a device
    // CUDA lists but cannot use.
    std::string probe_reason;
    try {
      if (probe_device(&probe_reason).has_value()) return std::string();
    } catch (const std::exception& error) {
      probe_reason = error.what();
    }
    return "no usable NVIDIA GPU: " + probe_reason;
  }();
  return reason;
}

}  // namespace resident
