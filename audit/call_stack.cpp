#include "audit/call_stack.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace resident::audit {

namespace {

constexpr int kMaxCaptured = 48;

std::string demangle(const char* name) {
  if (name == nullptr) return "??";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status),
                                             std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

std::string base_name(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_cuda_library(const std::string& object) {
  const std::string name = base_name(object);
  for (const char* prefix : {"libcuda.", "libcudart", "libcupti", "libcublas", "libcurand",
                             "libnvtx", "libresident_audit_inject"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

// The tracer's own frames and CUDA API entry points compiled into the program (static cudart).
bool is_audit_or_runtime_function(const std::string& function) {
  for (const char* prefix : {"resident::audit::(anonymous namespace)", "resident::audit::capture_stack",
                             "cuda", "__cuda", "cublas", "cupti", "curand"})
    if (function.rfind(prefix, 0) == 0) return true;
  // Driver-style entry points: cu followed by an upper-case letter (cuMemcpyDtoH).
  return function.size() > 2 && function[0] == 'c' && function[1] == 'u' &&
         function[2] >= 'A' && function[2] <= 'Z';
}

// Runs addr2line once per (object, offset); cached, since the same sites repeat.
struct Addr2Line {
  std::string function;
  std::string location;
};

Addr2Line run_addr2line(const std::string& object, std::uintptr_t offset) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::uintptr_t>, Addr2Line> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(object, offset);
  if (const auto it = cache.find(key); it != cache.end()) return it->second;
  Addr2Line result;
  if (object.find('\'') == std::string::npos) {
    char command[1200];
    std::snprintf(command, sizeof command, "addr2line -C -f -e '%s' 0x%llx 2>/dev/null",
                  object.c_str(), static_cast<unsigned long long>(offset));
    if (FILE* pipe = popen(command, "r")) {
      std::array<char, 2048> line{};
      if (std::fgets(line.data(), line.size(), pipe)) {
        result.function = line.data();
        while (!result.function.empty() && result.function.back() == '\n') result.function.pop_back();
      }
      if (std::fgets(line.data(), line.size(), pipe)) {
        std::string loc = line.data();
        while (!loc.empty() && loc.back() == '\n') loc.pop_back();
        if (const std::size_t paren = loc.find(" ("); paren != std::string::npos) loc.resize(paren);
        if (loc.rfind("??", 0) != 0) result.location = loc;
      }
      pclose(pipe);
    }
  }
  if (result.function == "??") result.function.clear();
  cache.emplace(key, result);
  return result;
}

}  // namespace

namespace {
// Whether a return address lies in a CUDA library (cached: call paths repeat).
bool in_cuda_library(void* address) {
  static std::mutex mutex;
  static std::unordered_map<void*, bool> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = cache.find(address); it != cache.end()) return it->second;
  Dl_info info{};
  const bool cuda = dladdr(address, &info) != 0 && info.dli_fname != nullptr &&
                    is_cuda_library(info.dli_fname);
  cache.emplace(address, cuda);
  return cuda;
}
}  // namespace

RawStack capture_stack() {
  std::array<void*, kMaxCaptured> frames{};
  const int n = std::max(backtrace(frames.data(), kMaxCaptured), 0);
  // Keep the caller's frames only: everything after the last frame inside a CUDA library (the
  // tracer's own frames and the driver's, whose paths differ between first and later calls).
  int first = 0;
  for (int i = 0; i < n; ++i)
    if (in_cuda_library(frames[static_cast<std::size_t>(i)])) first = i + 1;
  return RawStack(frames.begin() + first, frames.begin() + n);
}

std::vector<StackFrame> symbolize(const RawStack& stack, std::size_t max_frames) {
  std::vector<StackFrame> out;
  for (void* address : stack) {
    if (out.size() >= max_frames) break;
    Dl_info info{};
    if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) continue;
    StackFrame frame;
    frame.object = info.dli_fname;
    if (is_cuda_library(frame.object)) continue;
    // Return addresses point after the call; step back one byte to land inside it.
    const auto offset = reinterpret_cast<std::uintptr_t>(address) -
                        reinterpret_cast<std::uintptr_t>(info.dli_fbase) - 1;
    const Addr2Line resolved = run_addr2line(frame.object, offset);
    frame.function = !resolved.function.empty() ? resolved.function : demangle(info.dli_sname);
    frame.location = resolved.location;
    if (is_audit_or_runtime_function(frame.function)) continue;
    if (frame.function.rfind("backtrace", 0) == 0) continue;
    if (frame.function == "??" && out.empty()) continue;  // unnamed glue before user code
    frame.object = base_name(frame.object);
    out.push_back(std::move(frame));
  }
  return out;
}

}  // namespace resident::audit
