// Deliberately failing calls on a real GPU throw resident::Error naming the call, the
// error and the file:line of the check.
#include <cupti.h>
#include <gtest/gtest.h>

#include <string>

#include "kernels/core/error.h"
#include "lib/core/driver_api.h"
#include "lib/core/library_checks.h"
#include "tests/support/gpu.h"

namespace {

using resident::Error;

void expect_names(const Error& e, const std::string& call, const std::string& error, int line) {
  const std::string what = e.what();
  EXPECT_NE(what.find(call), std::string::npos) << what;
  EXPECT_NE(what.find(error), std::string::npos) << what;
  EXPECT_NE(what.find("tests/core/gpu_error_test.cu:" + std::to_string(line)), std::string::npos)
      << what;
}

TEST(GpuError, FailingRuntimeCallThrows) {
  RESIDENT_REQUIRE_GPU();
  int line = 0;
  try {
    line = __LINE__; RESIDENT_CUDA_CHECK(cudaSetDevice(1 << 20));
    FAIL() << "cudaSetDevice on a device that does not exist succeeded";
  } catch (const Error& e) {
    expect_names(e, "cudaSetDevice(1 << 20)", "cudaErrorInvalidDevice", line);
  }
}

TEST(GpuError, FailingAllocationNamesTheBytes) {
  RESIDENT_REQUIRE_GPU();
  void* ptr = nullptr;
  const std::size_t too_much = std::size_t{1} << 50;  // 1 PiB
  int line = 0;
  try {
    line = __LINE__; RESIDENT_CUDA_CHECK(cudaMalloc(&ptr, too_much));
    FAIL() << "a 1 PiB cudaMalloc succeeded";
  } catch (const Error& e) {
    expect_names(e, "cudaMalloc(&ptr, too_much)", "cudaErrorMemoryAllocation", line);
  }
  (void)cudaGetLastError();
}

TEST(GpuError, FailingDriverCallThrows) {
  RESIDENT_REQUIRE_GPU();
  auto* init = resident::driver_function<CUresult(unsigned)>("cuInit");
  auto* device_get = resident::driver_function<CUresult(CUdevice*, int)>("cuDeviceGet");
  ASSERT_NE(init, nullptr);
  ASSERT_NE(device_get, nullptr);
  RESIDENT_CU_CHECK(init(0));
  CUdevice device = 0;
  int line = 0;
  try {
    line = __LINE__; RESIDENT_CU_CHECK(device_get(&device, 1 << 20));
    FAIL() << "cuDeviceGet on a device that does not exist succeeded";
  } catch (const Error& e) {
    expect_names(e, "device_get(&device, 1 << 20)", "CUDA_ERROR_INVALID_DEVICE", line);
  }
}

TEST(GpuError, FailingCublasCallThrows) {
  RESIDENT_REQUIRE_GPU();
  cublasHandle_t handle = nullptr;
  RESIDENT_CUBLAS_CHECK(cublasCreate(&handle));
  int line = 0;
  try {
    // A negative matrix dimension is rejected before any device work.
    const float one = 1.0f;
    line = __LINE__; RESIDENT_CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, -1, 1, 1, &one, nullptr, 1, nullptr, 1, &one, nullptr, 1));
    FAIL() << "cublasSgemm with m = -1 succeeded";
  } catch (const Error& e) {
    expect_names(e, "cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, -1,", "CUBLAS_STATUS_INVALID_VALUE",
                 line);
  }
  RESIDENT_CUBLAS_CHECK(cublasDestroy(handle));
}

TEST(GpuError, FailingCurandCallThrows) {
  RESIDENT_REQUIRE_GPU();
  curandGenerator_t generator = nullptr;
  RESIDENT_CURAND_CHECK(curandCreateGenerator(&generator, CURAND_RNG_QUASI_SOBOL32));
  int line = 0;
  try {
    // A quasi-random generator has no pseudo-random seed.
    line = __LINE__; RESIDENT_CURAND_CHECK(curandSetPseudoRandomGeneratorSeed(generator, 1234));
    FAIL() << "seeding a Sobol generator succeeded";
  } catch (const Error& e) {
    expect_names(e, "curandSetPseudoRandomGeneratorSeed(generator, 1234)", "CURAND_STATUS_TYPE_ERROR",
                 line);
  }
  RESIDENT_CURAND_CHECK(curandDestroyGenerator(generator));
}

TEST(GpuError, FailingCuptiCallThrows) {
  RESIDENT_REQUIRE_GPU();
  int line = 0;
  try {
    line = __LINE__; RESIDENT_CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_INVALID));
    FAIL() << "enabling the invalid activity kind succeeded";
  } catch (const Error& e) {
    expect_names(e, "cuptiActivityEnable(CUPTI_ACTIVITY_KIND_INVALID)", "CUPTI_ERROR", line);
  }
}

}  // namespace
