// The one gate of every GPU test. Without a usable CUDA device the test is skipped with
// "GPU test skipped: <reason>", the reason in plain words ("no NVIDIA GPU found (no driver
// loaded)", "no NVIDIA GPU found", "NVIDIA driver 535.104 is too old for CUDA runtime 13.0", or
// the CUDA error itself); with RESIDENT_REQUIRE_GPU=1 in the environment (ci/gpu-check, ctest
// --preset gpu) the same situation is a failure, so a GPU runner cannot pass by skipping.
// The summary printed at the end of a ctest run (tests/summarize_test_records.cmake) counts the
// skips by the text after kGpuSkipPrefix.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace resident::test {

inline constexpr std::string_view kGpuSkipPrefix = "GPU test skipped: ";

// True when a CUDA device is usable; otherwise false and `reason` says why (see above).
bool gpu_available(std::string* reason);
// True when RESIDENT_REQUIRE_GPU is set to a non-empty value other than "0".
bool gpu_required();

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

}  // namespace resident::test

#define RESIDENT_REQUIRE_GPU()                                                          \
  do {                                                                                  \
    std::string resident_reason_;                                                       \
    if (!::resident::test::gpu_available(&resident_reason_)) {                          \
      if (::resident::test::gpu_required()) {                                           \
        FAIL() << resident_reason_ << " (RESIDENT_REQUIRE_GPU is set: GPU tests may not skip)"; \
      }                                                                                 \
      GTEST_SKIP() << ::resident::test::kGpuSkipPrefix << resident_reason_;             \
    }                                                                                   \
  } while (0)
