// Whether this machine has a usable NVIDIA GPU, and if not, why, in plain words: the one answer
// the GPU-test skip helper (tests/support/gpu.h) and resident-train give a user, e.g.
// "no NVIDIA GPU found (no driver loaded)", "no NVIDIA GPU found", "NVIDIA driver 535.104 is
// too old for CUDA runtime 13.0 (...)", or the CUDA error itself.
#pragma once

#include <string>

namespace resident {

// What of the NVIDIA driver this machine has: the kernel module (/proc/driver/nvidia/version)
// and the user-space library the CUDA runtime loads (libcuda.so.1).
struct DriverPresence {
  bool kernel_module = false;
  std::string kernel_module_version;  // e.g. "550.54.14"; empty when unknown
  bool user_library = false;
};
DriverPresence probe_driver();

// The reason in words for cudaGetDeviceCount's result (`status` a cudaError_t, `device_count`
// its count); empty when a device is there. Pure: unit-tested without a GPU.
// "insufficient driver" is only said when a driver is there (module and library) and too old;
// with neither, CUDA reports the same error, and the reason is "no driver loaded".
std::string describe_gpu_absence(int status, int device_count, const DriverPresence& driver,
                                 int runtime_version);

// Empty when a CUDA device is usable (listed and its properties readable); otherwise why not.
// Asks the runtime once per process and keeps the answer; clears the runtime's sticky error.
const std::string& gpu_absence_reason();

}  // namespace resident
