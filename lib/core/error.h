// resident::Error and the check macros for the CUDA runtime and driver APIs.
// Library code never calls exit(): a failed call throws Error naming the call text,
// the error's name and description, and the file:line of the check.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace resident {

class Error : public std::runtime_error {
 public:
  // `call` is the source text of the failed call (or a short description of the failed
  // operation), `error_name` the API's name for the code (e.g. cudaErrorInvalidValue).
  Error(std::string call, std::string error_name, std::string detail, const char* file, int line);

  const std::string& call() const noexcept { return call_; }
  const std::string& error_name() const noexcept { return error_name_; }
  const std::string& file() const noexcept { return file_; }
  int line() const noexcept { return line_; }

 private:
  std::string call_;
  std::string error_name_;
  std::string file_;
  int line_;
};

namespace detail {
[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line);
[[noreturn]] void throw_cu_error(CUresult code, const char* call, const char* file, int line);
}  // namespace detail

}  // namespace resident

// CUDA runtime API call.
#define RESIDENT_CUDA_CHECK(call)                                                   \
  do {                                                                              \
    const cudaError_t resident_status_ = (call);                                    \
    if (resident_status_ != cudaSuccess)                                            \
      ::resident::detail::throw_cuda_error(resident_status_, #call, __FILE__, __LINE__); \
  } while (0)

// CUDA driver API call.
#define RESIDENT_CU_CHECK(call)                                                     \
  do {                                                                              \
    const CUresult resident_status_ = (call);                                       \
    if (resident_status_ != CUDA_SUCCESS)                                           \
      ::resident::detail::throw_cu_error(resident_status_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: reports launch-configuration errors without synchronizing.
#define RESIDENT_CHECK_LAUNCH(kernel_name)                                          \
  do {                                                                              \
    const cudaError_t resident_status_ = cudaGetLastError();                        \
    if (resident_status_ != cudaSuccess)                                            \
      ::resident::detail::throw_cuda_error(resident_status_, "launch of " kernel_name, \
                                           __FILE__, __LINE__);                     \
  } while (0)
