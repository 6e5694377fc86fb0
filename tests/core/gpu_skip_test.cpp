// The skip helper itself: the reason is empty exactly when a GPU is present, and each way of
// having no GPU is named in plain words ("insufficient driver" only when a driver is there).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/support/gpu.h"

namespace {

using resident::test::describe_gpu_absence;
using resident::test::DriverPresence;

const DriverPresence kNoDriver{};
const DriverPresence kDriver{true, "535.104.05", true};

TEST(GpuSkipHelper, ReasonIsEmptyExactlyWhenAGpuIsPresent) {
  std::string reason;
  const bool available = resident::test::gpu_available(&reason);
  if (available) {
    EXPECT_TRUE(reason.empty()) << reason;
  } else {
    EXPECT_FALSE(reason.empty());
    std::printf("  this machine: %s\n", reason.c_str());
  }
}

TEST(GpuSkipHelper, NoDriverIsSaidAsSuchWhateverCudaReports) {
  // Without any driver the CUDA runtime reports cudaErrorInsufficientDriver ("CUDA driver
  // version is insufficient"): the reason must not repeat that.
  for (const int status : {static_cast<int>(cudaErrorInsufficientDriver),
                           static_cast<int>(cudaErrorNoDevice), static_cast<int>(cudaSuccess)})
    EXPECT_EQ(describe_gpu_absence(status, 0, kNoDriver, 13000),
              "no NVIDIA GPU found (no driver loaded)")
        << status;
}

TEST(GpuSkipHelper, ADriverWithoutADeviceIsNoGpuFound) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string want =
      visible == nullptr
          ? std::string("no NVIDIA GPU found")
          : std::string("no NVIDIA GPU found (CUDA_VISIBLE_DEVICES=\"") + visible + "\")";
  EXPECT_EQ(describe_gpu_absence(cudaErrorNoDevice, 0, kDriver, 13000), want);
  EXPECT_EQ(describe_gpu_absence(cudaSuccess, 0, kDriver, 13000), want);
}

TEST(GpuSkipHelper, InsufficientDriverOnlyWhenADriverIsThere) {
  const std::string old = describe_gpu_absence(cudaErrorInsufficientDriver, 0, kDriver, 13000);
  EXPECT_EQ(old.rfind("NVIDIA driver 535.104.05 is too old for CUDA runtime 13.0 (", 0), 0u) << old;
  EXPECT_NE(old.find("cudaErrorInsufficientDriver"), std::string::npos) << old;

  const DriverPresence module_only{true, "550.54.14", false};
  const std::string no_library =
      describe_gpu_absence(cudaErrorInsufficientDriver, 0, module_only, 13000);
  EXPECT_NE(no_library.find("libcuda.so.1 is not installed"), std::string::npos) << no_library;
  EXPECT_EQ(no_library.find("too old"), std::string::npos) << no_library;

  const DriverPresence library_only{false, "", true};
  EXPECT_EQ(describe_gpu_absence(cudaErrorInsufficientDriver, 0, library_only, 13000),
            "no NVIDIA GPU found (libcuda.so.1 is installed but no NVIDIA kernel driver is "
            "loaded)");
}

TEST(GpuSkipHelper, OtherErrorsAreReportedAsTheyAre) {
  const std::string reason = describe_gpu_absence(cudaErrorDevicesUnavailable, 0, kDriver, 13000);
  EXPECT_EQ(reason.rfind("no usable NVIDIA GPU: cudaGetDeviceCount failed (", 0), 0u) << reason;
  EXPECT_NE(reason.find("cudaErrorDevicesUnavailable"), std::string::npos) << reason;
}

TEST(GpuSkipHelper, APresentDeviceHasNoReason) {
  EXPECT_EQ(describe_gpu_absence(cudaSuccess, 1, kDriver, 13000), "");
  EXPECT_EQ(describe_gpu_absence(cudaSuccess, 2, kNoDriver, 13000), "");
}

}  // namespace
