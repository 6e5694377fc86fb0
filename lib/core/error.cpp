#include "lib/core/error.h"

#include <utility>

#include "lib/core/driver_api.h"

namespace resident {

namespace {
std::string format_message(const std::string& call, const std::string& error_name,
                           const std::string& detail, const char* file, int line) {
  std::string msg = call + " failed with " + error_name;
  if (!detail.empty()) msg += " (" + detail + ")";
  msg += " at ";
  msg += file;
  msg += ":" + std::to_string(line);
  return msg;
}
}  // namespace

Error::Error(std::string call, std::string error_name, std::string detail, const char* file,
             int line)
    : std::runtime_error(format_message(call, error_name, detail, file, line)),
      call_(std::move(call)),
      error_name_(std::move(error_name)),
      file_(file),
      line_(line) {}

namespace detail {

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  throw Error(call, cudaGetErrorName(code), cudaGetErrorString(code), file, line);
}

void throw_cu_error(CUresult code, const char* call, const char* file, int line) {
  throw Error(call, driver_error_name(code), driver_error_text(code), file, line);
}

}  // namespace detail
}  // namespace resident
