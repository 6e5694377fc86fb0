// What the local GPU is, or why there is none. Used by the GPU-test skip helper, the
// self-check and the benchmark context.
#pragma once

#include <optional>
#include <string>

namespace resident {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  std::size_t global_memory_bytes = 0;
  int driver_version = 0;   // e.g. 13000
  int runtime_version = 0;  // e.g. 13000
  int sm_clock_khz = 0;     // 0 when not readable
};

// The first CUDA device, or std::nullopt with `reason` set to
// "no CUDA device: <error name> (<error text>)" / "no CUDA device: 0 devices found".
std::optional<DeviceInfo> probe_device(std::string* reason);

std::string version_string(int cuda_version);  // 13000 -> "13.0"

}  // namespace resident
