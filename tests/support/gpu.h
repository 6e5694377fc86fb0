// The one gate of every GPU test. Without a usable CUDA device the test is skipped with
// "no CUDA device: <cudaGetDeviceCount error>"; with RESIDENT_REQUIRE_GPU=1 in the
// environment (ci/gpu-check) the same situation is a failure, so a GPU runner cannot
// pass by skipping.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace resident::test {

// True when a CUDA device is usable; otherwise false and `reason` says why.
bool gpu_available(std::string* reason);
// True when RESIDENT_REQUIRE_GPU is set to a non-empty value other than "0".
bool gpu_required();

}  // namespace resident::test

#define RESIDENT_REQUIRE_GPU()                                                          \
  do {                                                                                  \
    std::string resident_reason_;                                                       \
    if (!::resident::test::gpu_available(&resident_reason_)) {                          \
      if (::resident::test::gpu_required()) {                                           \
        FAIL() << resident_reason_ << " (RESIDENT_REQUIRE_GPU is set: GPU tests may not skip)"; \
      }                                                                                 \
      GTEST_SKIP() << resident_reason_;                                                 \
    }                                                                                   \
  } while (0)
