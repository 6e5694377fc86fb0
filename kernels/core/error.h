// resident::Error and the check macros for the CUDA runtime API, header-only so that kernels/
// depends on nothing above it. Library code never calls exit(): a failed call throws Error
// naming the call text, the error's name and description, and the file:line of the check.
// The driver-API check (RESIDENT_CU_CHECK) is in lib/core/driver_api.h.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace resident {

class Error : public std::runtime_error {
 public:
  // `call` is the source text of the failed call (or a short description of the failed
  // operation), `error_name` the API's name for the code (e.g. cudaErrorInvalidValue).
  Error(std::string call, std::string error_name, std::string detail, const char* file, int line)
      : std::runtime_error(format(call, error_name, detail, file, line)),
        call_(std::move(call)),
        error_name_(std::move(error_name)),
        file_(file),
        line_(line) {}

  const std::string& call() const noexcept { return call_; }
  const std::string& error_name() const noexcept { return error_name_; }
  const std::string& file() const noexcept { return file_; }
  int line() const noexcept { return line_; }

 private:
  // "<call> failed with <error_name> (<detail>) at <file>:<line>"
  static std::string format(const std::string& call, const std::string& error_name,
                            const std::string& detail, const char* file, int line) {
    std::string msg = call + " failed with " + error_name;
    if (!detail.empty()) msg += " (" + detail + ")";
    msg += " at ";
    msg += file;
    msg += ":" + std::to_string(line);
    return msg;
  }

  std::string call_;
  std::string error_name_;
  std::string file_;
  int line_;
};

namespace detail {
[[noreturn]] inline void throw_cuda_error(cudaError_t code, const char* call, const char* file,
                                          int line) {
  throw Error(call, cudaGetErrorName(code), cudaGetErrorString(code), file, line);
}
}  // namespace detail

}  // namespace resident

// CUDA runtime API call.
#define RESIDENT_CUDA_CHECK(call)                                                   \
  do {                                                                              \
    const cudaError_t resident_status_ = (call);                                    \
    if (resident_status_ != cudaSuccess)                                            \
      ::resident::detail::throw_cuda_error(resident_status_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: reports launch-configuration errors without synchronizing.
#define RESIDENT_CHECK_LAUNCH(kernel_name)                                          \
  do {                                                                              \
    const cudaError_t resident_status_ = cudaGetLastError();                        \
    if (resident_status_ != cudaSuccess)                                            \
      ::resident::detail::throw_cuda_error(resident_status_, "launch of " kernel_name, \
                                           __FILE__, __LINE__);                     \
  } while (0)
