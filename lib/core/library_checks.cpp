#include "lib/core/library_checks.h"

#include <cupti.h>

#include <string>

namespace resident::detail {

void throw_cublas_error(cublasStatus_t code, const char* call, const char* file, int line) {
  throw Error(call, cublasGetStatusName(code), cublasGetStatusString(code), file, line);
}

const char* curand_status_name(curandStatus_t code) noexcept {
  switch (code) {
    case CURAND_STATUS_SUCCESS: return "CURAND_STATUS_SUCCESS";
    case CURAND_STATUS_VERSION_MISMATCH: return "CURAND_STATUS_VERSION_MISMATCH";
    case CURAND_STATUS_NOT_INITIALIZED: return "CURAND_STATUS_NOT_INITIALIZED";
    case CURAND_STATUS_ALLOCATION_FAILED: return "CURAND_STATUS_ALLOCATION_FAILED";
    case CURAND_STATUS_TYPE_ERROR: return "CURAND_STATUS_TYPE_ERROR";
    case CURAND_STATUS_OUT_OF_RANGE: return "CURAND_STATUS_OUT_OF_RANGE";
    case CURAND_STATUS_LENGTH_NOT_MULTIPLE: return "CURAND_STATUS_LENGTH_NOT_MULTIPLE";
    case CURAND_STATUS_DOUBLE_PRECISION_REQUIRED:
      return "CURAND_STATUS_DOUBLE_PRECISION_REQUIRED";
    case CURAND_STATUS_LAUNCH_FAILURE: return "CURAND_STATUS_LAUNCH_FAILURE";
    case CURAND_STATUS_PREEXISTING_FAILURE: return "CURAND_STATUS_PREEXISTING_FAILURE";
    case CURAND_STATUS_INITIALIZATION_FAILED: return "CURAND_STATUS_INITIALIZATION_FAILED";
    case CURAND_STATUS_ARCH_MISMATCH: return "CURAND_STATUS_ARCH_MISMATCH";
    case CURAND_STATUS_INTERNAL_ERROR: return "CURAND_STATUS_INTERNAL_ERROR";
  }
  return "CURAND_STATUS_UNKNOWN";
}

void throw_curand_error(curandStatus_t code, const char* call, const char* file, int line) {
  throw Error(call, curand_status_name(code), "", file, line);
}

void throw_cupti_error(CUptiResult code, const char* call, const char* file, int line) {
  const char* text = nullptr;
  if (cuptiGetResultString(code, &text) != CUPTI_SUCCESS || text == nullptr) text = "";
  const std::string name = text[0] != '\0' ? std::string(text)
                                           : "CUptiResult " + std::to_string(static_cast<int>(code));
  throw Error(call, name, "", file, line);
}

}  // namespace resident::detail
