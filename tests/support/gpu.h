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

#include "lib/core/gpu_presence.h"

namespace resident::test {

inline constexpr std::string_view kGpuSkipPrefix = "GPU test skipped: ";

// True when a CUDA device is usable; otherwise false and `reason` says why (see above).
bool gpu_available(std::string* reason);
// True when RESIDENT_REQUIRE_GPU is set to a non-empty value other than "0".
bool gpu_required();

// The driver probe and the wording live in lib/core/gpu_presence.h (resident-train says the
// same); named here too for the tests of the skip helper.
using resident::describe_gpu_absence;
using resident::DriverPresence;
using resident::probe_driver;

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
