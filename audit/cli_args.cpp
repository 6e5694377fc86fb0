#include "audit/cli_args.h"

#include <unistd.h>

#include <cstdlib>

namespace resident::audit {

const char* const kCliHelp =
    "usage: resident-audit [--contract FILE] [--json OUT] [--sync-stacks] -- PROGRAM [ARGS...]\n"
    "       resident-audit --print-inject-path | --version | --help\n"
    "\n"
    "Runs PROGRAM with the CUPTI transfer audit injected (CUDA_INJECTION64_PATH) and counts\n"
    "every host<->device copy, memset, synchronization, unified-memory migration and\n"
    "mapped/managed allocation, attributed to the program's NVTX ranges (nested ranges are\n"
    "joined with '/'; work outside any range is \"(unscoped)\"). Prints a per-range table.\n"
    "\n"
    "  --contract FILE  check the counts against a contract file (JSON):\n"
    "                   {\"contracts\": [{\"phase\": \"train/epoch\", \"max_d2h_scalar\": 2,\n"
    "                     \"max_d2h_bulk\": 0, \"max_h2d\": 0, \"max_syncs\": 1,\n"
    "                     \"allow_mapped\": false}]}   ('*' is a wildcard in \"phase\";\n"
    "                   a missing limit is unlimited)\n"
    "  --json OUT       write the report (counters and call sites) as JSON to OUT\n"
    "  --sync-stacks    also record the host call stack of every synchronization\n"
    "  --print-inject-path  print the injection library this resident-audit uses and exit\n"
    "  --version        print the version and exit\n"
    "  -h, --help       show this help\n"
    "\n"
    "The injection library is $RESIDENT_AUDIT_INJECTION when set, else\n"
    "libresident_audit_inject.so next to this executable (a build tree) or in the install's\n"
    "library directory (e.g. bin/../lib), found from this executable's own location, so an\n"
    "installed prefix can be moved.\n"
    "\n"
    "exit status: 0 within contract (or no contract), 1 contract violated,\n"
    "             2 bad usage (unknown option, unreadable contract, program not found,\n"
    "               --json OUT not writable, injection library missing), or the program\n"
    "               exited 0 without initializing CUDA (nothing to audit)\n"
    "             3 the program failed (non-zero exit or signal) but the contract held\n";

std::optional<std::string> find_program(const std::string& program) {
  if (program.empty()) return std::nullopt;
  if (program.find('/') != std::string::npos)
    return access(program.c_str(), X_OK) == 0 ? std::optional<std::string>(program) : std::nullopt;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    const std::string candidate = dir + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return std::nullopt;
}

CliParse parse_cli_args(const std::vector<std::string>& argv) {
  CliParse result;
  CliArgs args;
  std::size_t i = 0;
  const auto value_of = [&](const std::string& flag) -> std::optional<std::string> {
    if (i + 1 >= argv.size() || argv[i + 1].empty() || argv[i + 1] == "--") {
      result.error = "resident-audit: " + flag + " needs a value (see --help)";
      return std::nullopt;
    }
    return argv[++i];
  };
  for (; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg == "--") {
      args.program.assign(argv.begin() + static_cast<std::ptrdiff_t>(i) + 1, argv.end());
      break;
    }
    if (arg == "-h" || arg == "--help" || arg == "--version" || arg == "--print-inject-path") {
      args.help = arg == "-h" || arg == "--help";
      args.version = arg == "--version";
      args.print_inject_path = arg == "--print-inject-path";
      result.args = args;
      return result;
    }
    if (arg == "--contract") {
      const auto v = value_of(arg);
      if (!v) return result;
      args.contract_path = *v;
    } else if (arg == "--json") {
      const auto v = value_of(arg);
      if (!v) return result;
      args.json_path = *v;
    } else if (arg == "--sync-stacks") {
      args.sync_stacks = true;
    } else if (!arg.empty() && arg[0] == '-') {
      result.error = "resident-audit: unknown option '" + arg + "' (see --help)";
      return result;
    } else {
      result.error = "resident-audit: put '--' before the program: resident-audit [options] -- " + arg;
      return result;
    }
  }
  if (args.program.empty()) {
    result.error = "resident-audit: no program given (usage: resident-audit [options] -- PROGRAM [ARGS...])";
    return result;
  }
  result.args = args;
  return result;
}

}  // namespace resident::audit
