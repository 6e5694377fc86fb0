// resident-audit: audits any CUDA program through the injection library. See kCliHelp.
#include <cupti.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "audit/cli_args.h"
#include "audit/contract.h"
#include "audit/report.h"

// Set by audit/CMakeLists.txt: the install's library directory relative to its bin directory.
#ifndef RESIDENT_AUDIT_INJECT_FROM_BIN
#define RESIDENT_AUDIT_INJECT_FROM_BIN "../lib"
#endif
#ifndef RESIDENT_VERSION
#define RESIDENT_VERSION "unknown"
#endif

namespace {

using namespace resident::audit;

// The directory of this executable, symlinks resolved (/proc/self/exe), or nullopt.
std::optional<std::filesystem::path> executable_directory() {
  char buffer[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return std::nullopt;
  buffer[n] = '\0';
  return std::filesystem::path(buffer).parent_path();
}

struct InjectionLookup {
  std::optional<std::string> path;  // the first readable candidate
  std::vector<std::string> tried;   // every candidate, in order
};

// $RESIDENT_AUDIT_INJECTION alone when set; else next to this executable (a build tree), then in
// the install's library directory relative to the executable's directory
// (RESIDENT_AUDIT_INJECT_FROM_BIN, from the install layout), so a moved prefix keeps working.
InjectionLookup find_injection_library() {
  InjectionLookup lookup;
  if (const char* env = std::getenv("RESIDENT_AUDIT_INJECTION"); env != nullptr && env[0] != '\0') {
    lookup.tried.push_back(std::string(env) + " ($RESIDENT_AUDIT_INJECTION)");
    if (access(env, R_OK) == 0) lookup.path = env;
    return lookup;
  }
  const std::optional<std::filesystem::path> dir = executable_directory();
  if (!dir) {
    lookup.tried.push_back("(cannot read /proc/self/exe)");
    return lookup;
  }
  for (const std::filesystem::path& candidate :
       {*dir / kInjectionLibraryName,
        (*dir / RESIDENT_AUDIT_INJECT_FROM_BIN / kInjectionLibraryName).lexically_normal()}) {
    lookup.tried.push_back(candidate.string());
    if (!lookup.path && access(candidate.c_str(), R_OK) == 0) lookup.path = candidate.string();
  }
  return lookup;
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// Whether PATH can be written, checked without truncating an existing file; leaves no new file.
bool writable(const std::string& path, std::string& why) {
  struct stat info {};
  const bool existed = stat(path.c_str(), &info) == 0;
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  if (fd < 0) {
    why = std::strerror(errno);
    return false;
  }
  close(fd);
  if (!existed) unlink(path.c_str());
  return true;
}

// libcupti as loaded by this process: NVTX_INJECTION64_PATH for the program's NVTX ranges.
std::string cupti_library() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiSubscribe), &info) != 0 && info.dli_fname != nullptr)
    return info.dli_fname;
  return "libcupti.so";
}

int run_program(const std::vector<std::string>& program, const std::string& injection,
                const std::string& report_path, bool sync_stacks) {
  const pid_t child = fork();
  if (child < 0) {
    std::perror("resident-audit: fork");
    return -1;
  }
  if (child == 0) {
    setenv("CUDA_INJECTION64_PATH", injection.c_str(), 1);
    setenv("NVTX_INJECTION64_PATH", cupti_library().c_str(), 1);
    setenv("RESIDENT_AUDIT_OUT", report_path.c_str(), 1);
    if (sync_stacks) setenv("RESIDENT_AUDIT_SYNC_STACKS", "1", 1);
    std::vector<char*> argv;
    for (const std::string& a : program) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "resident-audit: cannot run %s\n", program[0].c_str());
    _exit(127);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
  }
  return status;
}

int audit_main(const std::vector<std::string>& argv) {
  const CliParse parsed = parse_cli_args(argv);
  if (!parsed.args) {
    std::fprintf(stderr, "%s\n", parsed.error.c_str());
    return kExitUsage;
  }
  const CliArgs& args = *parsed.args;
  if (args.help) {
    std::fputs(kCliHelp, stdout);
    return kExitOk;
  }
  if (args.version) {
    std::printf("resident-audit %s\n", RESIDENT_VERSION);
    return kExitOk;
  }
  const InjectionLookup injection = find_injection_library();
  if (!injection.path) {
    std::fprintf(stderr,
                 "resident-audit: injection library %s not found (tried: %s); set "
                 "RESIDENT_AUDIT_INJECTION to its path\n",
                 kInjectionLibraryName, join(injection.tried, ", ").c_str());
    return kExitUsage;
  }
  if (args.print_inject_path) {
    std::printf("%s\n", injection.path->c_str());
    return kExitOk;
  }
  std::vector<TransferContract> contracts;
  if (args.contract_path) {
    try {
      contracts = load_contracts(*args.contract_path);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "resident-audit: %s\n", e.what());
      return kExitUsage;
    }
  }
  if (!find_program(args.program[0])) {
    std::fprintf(stderr, "resident-audit: program '%s' not found or not executable\n",
                 args.program[0].c_str());
    return kExitUsage;
  }
  if (std::string why; args.json_path && !writable(*args.json_path, why)) {
    std::fprintf(stderr, "resident-audit: cannot write --json %s: %s\n", args.json_path->c_str(),
                 why.c_str());
    return kExitUsage;
  }

  char report_path[] = "/tmp/resident-audit-XXXXXX";
  const int fd = mkstemp(report_path);
  if (fd < 0) {
    std::perror("resident-audit: mkstemp");
    return kExitUsage;
  }
  close(fd);
  const int status = run_program(args.program, *injection.path, report_path, args.sync_stacks);
  std::stringstream text;
  text << std::ifstream(report_path).rdbuf();
  std::remove(report_path);

  const bool program_ok = status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::string program_outcome = "exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  if (status >= 0 && WIFSIGNALED(status)) program_outcome = "killed by signal " + std::to_string(WTERMSIG(status));

  // What the injection library leaves (audit/inject.cpp): nothing when CUDA never loaded it,
  // {"started": true} when the program ended without running its exit handlers, {"error": ...}
  // when the tracer could not start, else the report.
  if (text.str().find_first_not_of(" \t\r\n") == std::string::npos) {
    std::fprintf(stderr,
                 "resident-audit: the program never initialized CUDA: nothing to audit (%s, %s)\n",
                 args.program[0].c_str(), program_outcome.c_str());
    return program_ok ? kExitUsage : kExitProgramFailed;
  }
  AuditReport report;
  try {
    const Json json = Json::parse(text.str());
    if (const Json* error = json.find("error"); error != nullptr && error->is_string()) {
      std::fprintf(stderr, "resident-audit: the audit could not start in %s: %s (%s)\n",
                   args.program[0].c_str(), error->as_string().c_str(), program_outcome.c_str());
      return kExitUsage;
    }
    if (json.find("started") != nullptr) {
      std::fprintf(stderr,
                   "resident-audit: %s initialized CUDA but ended without writing the audit "
                   "report (%s; killed, or exited through _exit)\n",
                   args.program[0].c_str(), program_outcome.c_str());
      return program_ok ? kExitUsage : kExitProgramFailed;
    }
    report = report_from_json(json);
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "resident-audit: %s wrote an unreadable audit report (%s; %s)\n",
                 args.program[0].c_str(), program_outcome.c_str(), e.what());
    return program_ok ? kExitUsage : kExitProgramFailed;
  }

  std::printf("resident-audit: %s (%s)\n%s", args.program[0].c_str(), program_outcome.c_str(),
              format_table(report).c_str());
  const std::vector<Violation> violations = check_contracts(report, contracts);
  if (args.contract_path) {
    if (violations.empty())
      std::printf("contract %s: kept\n", args.contract_path->c_str());
    else
      std::printf("contract %s: VIOLATED\n%s", args.contract_path->c_str(),
                  format_violations(violations).c_str());
  }
  if (args.json_path) {
    Json json = to_json(report);
    Json::Array messages;
    for (const Violation& v : violations) messages.push_back(v.message);
    json.as_object()["violations"] = std::move(messages);
    json.as_object()["program_outcome"] = program_outcome;
    std::ofstream out(*args.json_path);
    out << json.dump() << "\n";
    if (!out) {
      std::fprintf(stderr, "resident-audit: cannot write %s\n", args.json_path->c_str());
      return kExitUsage;
    }
  }
  if (!violations.empty()) return kExitViolation;
  return program_ok ? kExitOk : kExitProgramFailed;
}

}  // namespace

int main(int argc, char** argv) {
  return audit_main(std::vector<std::string>(argv + 1, argv + argc));
}
