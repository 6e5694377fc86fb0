// Check macros for the CUDA libraries: cuBLAS, cuRAND and CUPTI. Each throws
// resident::Error naming the call, the status name and the file:line of the check.
#pragma once

#include <cublas_v2.h>
#include <cupti_result.h>
#include <curand.h>

#include "kernels/core/error.h"

namespace resident::detail {
[[noreturn]] void throw_cublas_error(cublasStatus_t code, const char* call, const char* file,
                                     int line);
[[noreturn]] void throw_curand_error(curandStatus_t code, const char* call, const char* file,
                                     int line);
[[noreturn]] void throw_cupti_error(CUptiResult code, const char* call, const char* file,
                                    int line);
const char* curand_status_name(curandStatus_t code) noexcept;
}  // namespace resident::detail

#define RESIDENT_CUBLAS_CHECK(call)                                                  \
  do {                                                                               \
    const cublasStatus_t resident_status_ = (call);                                  \
    if (resident_status_ != CUBLAS_STATUS_SUCCESS)                                   \
      ::resident::detail::throw_cublas_error(resident_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define RESIDENT_CURAND_CHECK(call)                                                  \
  do {                                                                               \
    const curandStatus_t resident_status_ = (call);                                  \
    if (resident_status_ != CURAND_STATUS_SUCCESS)                                   \
      ::resident::detail::throw_curand_error(resident_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define RESIDENT_CUPTI_CHECK(call)                                                   \
  do {                                                                               \
    const CUptiResult resident_status_ = (call);                                     \
    if (resident_status_ != CUPTI_SUCCESS)                                           \
      ::resident::detail::throw_cupti_error(resident_status_, #call, __FILE__, __LINE__); \
  } while (0)
