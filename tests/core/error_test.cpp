// resident::Error and the check macros, without a GPU: error names and descriptions come
// from the runtime's tables, which need no device.
#include "kernels/core/error.h"

#include <gtest/gtest.h>

#include <string>

#include "lib/core/library_checks.h"

namespace {

using resident::Error;

TEST(Error, MessageNamesCallErrorAndLocation) {
  const Error e("cudaFoo(1, 2)", "cudaErrorInvalidValue", "invalid argument", "lib/x.cpp", 42);
  EXPECT_EQ(std::string(e.what()),
            "cudaFoo(1, 2) failed with cudaErrorInvalidValue (invalid argument) at lib/x.cpp:42");
  EXPECT_EQ(e.call(), "cudaFoo(1, 2)");
  EXPECT_EQ(e.error_name(), "cudaErrorInvalidValue");
  EXPECT_EQ(e.file(), "lib/x.cpp");
  EXPECT_EQ(e.line(), 42);
}

cudaError_t returns_invalid_value() { return cudaErrorInvalidValue; }

TEST(Error, CudaCheckThrowsWithCallTextAndFileLine) {
  int line = 0;
  try {
    line = __LINE__; RESIDENT_CUDA_CHECK(returns_invalid_value());
    FAIL() << "RESIDENT_CUDA_CHECK did not throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("returns_invalid_value()"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaErrorInvalidValue"), std::string::npos) << what;
    EXPECT_NE(what.find("tests/core/error_test.cpp:" + std::to_string(line)), std::string::npos)
        << what;
    EXPECT_EQ(e.line(), line);
  }
}

TEST(Error, CudaCheckPassesOnSuccess) {
  EXPECT_NO_THROW(RESIDENT_CUDA_CHECK(cudaSuccess));
}

TEST(Error, LibraryChecksNameTheStatus) {
  try {
    RESIDENT_CURAND_CHECK(CURAND_STATUS_OUT_OF_RANGE);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_name(), "CURAND_STATUS_OUT_OF_RANGE");
    EXPECT_NE(std::string(e.what()).find("CURAND_STATUS_OUT_OF_RANGE"), std::string::npos);
  }
  try {
    RESIDENT_CUBLAS_CHECK(CUBLAS_STATUS_INVALID_VALUE);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_name(), "CUBLAS_STATUS_INVALID_VALUE");
  }
  try {
    RESIDENT_CUPTI_CHECK(CUPTI_ERROR_INVALID_KIND);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(e.error_name().find("CUPTI_ERROR_INVALID_KIND"), std::string::npos) << e.what();
  }
}

}  // namespace
