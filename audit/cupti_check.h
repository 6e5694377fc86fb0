// Internal to audit/: the checks of CUPTI and CUDA runtime calls that the audit's own code makes.
// A failed call throws resident::audit::AuditError
//   "audit: <call text> failed with <error text> at <file>:<line>"
// (the audit depends on CUDA, CUPTI and NVTX only, so it cannot use lib/core's checks).
//   AUDIT_CUPTI_CHECK(cuptiActivityEnable(kind));
//   AUDIT_CUDA_CHECK(cudaDeviceSynchronize());
#pragma once

#include <cuda_runtime_api.h>
#include <cupti.h>

#include <string>

#include "audit/tracer.h"

namespace resident::audit::detail {

// CUPTI's text for `result`, or "CUPTI error" when it has none.
inline std::string cupti_error_text(CUptiResult result) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) return "CUPTI error";
  return text;
}

inline void check_cupti(CUptiResult result, const char* call, const char* file, int line) {
  if (result != CUPTI_SUCCESS)
    throw AuditError(std::string("audit: ") + call + " failed with " + cupti_error_text(result) +
                     " at " + file + ":" + std::to_string(line));
}

inline void check_cuda(cudaError_t result, const char* call, const char* file, int line) {
  if (result != cudaSuccess)
    throw AuditError(std::string("audit: ") + call + " failed with " + cudaGetErrorName(result) +
                     " (" + cudaGetErrorString(result) + ") at " + file + ":" + std::to_string(line));
}

}  // namespace resident::audit::detail

#define AUDIT_CUPTI_CHECK(call) ::resident::audit::detail::check_cupti((call), #call, __FILE__, __LINE__)
#define AUDIT_CUDA_CHECK(call) ::resident::audit::detail::check_cuda((call), #call, __FILE__, __LINE__)
