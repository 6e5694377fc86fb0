// Command line of resident-audit, parsed without side effects so it can be tested.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace resident::audit {

struct CliArgs {
  bool help = false;
  bool version = false;
  bool print_inject_path = false;  // print the injection library's path and exit
  std::optional<std::string> contract_path;
  std::optional<std::string> json_path;
  bool sync_stacks = false;
  std::vector<std::string> program;  // program and its arguments
};

struct CliParse {
  std::optional<CliArgs> args;  // set on success
  std::string error;            // one line, set on failure
};

CliParse parse_cli_args(const std::vector<std::string>& argv);  // argv without argv[0]

extern const char* const kCliHelp;

// Exit codes of resident-audit.
inline constexpr int kExitOk = 0;
inline constexpr int kExitViolation = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitProgramFailed = 3;

// Name of the injection library file; resident-audit looks for it next to itself (a build tree)
// and in the install's library directory (see kCliHelp).
inline constexpr const char* kInjectionLibraryName = "libresident_audit_inject.so";

// The program's path as execvp would find it (through PATH when it has no '/'), or nullopt.
std::optional<std::string> find_program(const std::string& program);

}  // namespace resident::audit
