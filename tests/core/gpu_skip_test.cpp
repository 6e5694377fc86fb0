// The skip helper itself: on a machine without a GPU it reports the cudaGetDeviceCount
// error as the reason; with a GPU it reports none.
#include <gtest/gtest.h>

#include "tests/support/gpu.h"

namespace {

TEST(GpuSkipHelper, ReasonIsEmptyExactlyWhenAGpuIsPresent) {
  std::string reason;
  const bool available = resident::test::gpu_available(&reason);
  if (available) {
    EXPECT_TRUE(reason.empty()) << reason;
  } else {
    EXPECT_EQ(reason.rfind("no CUDA device: ", 0), 0u) << reason;
    EXPECT_GT(reason.size(), std::string("no CUDA device: ").size()) << reason;
  }
}

}  // namespace
