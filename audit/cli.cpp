// resident-audit: audits any CUDA program through the injection library. See kCliHelp.
#include <cupti.h>
#include <dlfcn.h>
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "audit/cli_args.h"
#include "audit/contract.h"
#include "audit/report.h"

namespace {

using namespace resident::audit;

std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string executable_directory() {
  char buffer[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return ".";
  buffer[n] = '\0';
  return directory_of(buffer);
}

std::string injection_library() {
  if (const char* path = std::getenv("RESIDENT_AUDIT_INJECTION"); path != nullptr && path[0] != '\0')
    return path;
  return executable_directory() + "/libresident_audit_inject.so";
}

// libcupti as loaded by this process: NVTX_INJECTION64_PATH for the program's NVTX ranges.
std::string cupti_library() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiSubscribe), &info) != 0 && info.dli_fname != nullptr)
    return info.dli_fname;
  return "libcupti.so";
}

int run_program(const std::vector<std::string>& program, const std::string& report_path,
                bool sync_stacks) {
  const pid_t child = fork();
  if (child < 0) {
    std::perror("resident-audit: fork");
    return -1;
  }
  if (child == 0) {
    setenv("CUDA_INJECTION64_PATH", injection_library().c_str(), 1);
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
  if (access(injection_library().c_str(), R_OK) != 0) {
    std::fprintf(stderr, "resident-audit: injection library %s not found (set RESIDENT_AUDIT_INJECTION)\n",
                 injection_library().c_str());
    return kExitUsage;
  }

  char report_path[] = "/tmp/resident-audit-XXXXXX";
  const int fd = mkstemp(report_path);
  if (fd < 0) {
    std::perror("resident-audit: mkstemp");
    return kExitUsage;
  }
  close(fd);
  const int status = run_program(args.program, report_path, args.sync_stacks);
  std::stringstream text;
  text << std::ifstream(report_path).rdbuf();
  std::remove(report_path);

  const bool program_ok = status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::string program_outcome = "exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  if (status >= 0 && WIFSIGNALED(status)) program_outcome = "killed by signal " + std::to_string(WTERMSIG(status));

  AuditReport report;
  try {
    report = report_from_json(Json::parse(text.str()));
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "resident-audit: %s wrote no audit report (%s; %s). Did it initialize CUDA?\n",
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
