// resident-audit: argument errors (no GPU needed), then, on a GPU, auditing a separate program
// with planted transfers in named NVTX ranges through the injection library.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "audit/cli_args.h"
#include "audit/contract.h"
#include "audit/report.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident::audit;

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe)) result.output += buffer.data();
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

const std::string kCli = RESIDENT_AUDIT_CLI;
const std::string kPlanted = RESIDENT_PLANTED_PROGRAM;

TEST(AuditCliArgs, ParsesOptionsAndProgram) {
  const CliParse p = parse_cli_args({"--contract", "c.json", "--json", "o.json", "--sync-stacks",
                                     "--", "prog", "--flag-of-prog", "x"});
  ASSERT_TRUE(p.args.has_value()) << p.error;
  EXPECT_EQ(p.args->contract_path, "c.json");
  EXPECT_EQ(p.args->json_path, "o.json");
  EXPECT_TRUE(p.args->sync_stacks);
  EXPECT_EQ(p.args->program, (std::vector<std::string>{"prog", "--flag-of-prog", "x"}));
  EXPECT_TRUE(parse_cli_args({"--help"}).args->help);
  EXPECT_TRUE(parse_cli_args({"--version"}).args->version);
  EXPECT_TRUE(parse_cli_args({"--print-inject-path"}).args->print_inject_path);
}

TEST(AuditCliArgs, BadInputGetsOneLineErrors) {
  EXPECT_EQ(parse_cli_args({"--frobnicate", "--", "p"}).error,
            "resident-audit: unknown option '--frobnicate' (see --help)");
  EXPECT_EQ(parse_cli_args({"--contract"}).error, "resident-audit: --contract needs a value (see --help)");
  EXPECT_EQ(parse_cli_args({"--json", "--", "p"}).error, "resident-audit: --json needs a value (see --help)");
  EXPECT_EQ(parse_cli_args({}).error,
            "resident-audit: no program given (usage: resident-audit [options] -- PROGRAM [ARGS...])");
  EXPECT_EQ(parse_cli_args({"prog"}).error,
            "resident-audit: put '--' before the program: resident-audit [options] -- prog");
  EXPECT_FALSE(find_program("definitely-not-a-program-xyz").has_value());
  EXPECT_TRUE(find_program("sh").has_value());
}

TEST(AuditCli, UsageErrorsExitWithStatus2AndOneLine) {
  struct Case {
    std::string args;
    std::string message;
  };
  const std::string missing_contract = ::testing::TempDir() + "no-such-contract.json";
  const Case cases[] = {
      {"--bogus -- true", "unknown option '--bogus'"},
      {"-- /no/such/program", "program '/no/such/program' not found"},
      {"--contract " + missing_contract + " -- true", "cannot open contract file"},
      {"", "no program given"},
      {"--json " + ::testing::TempDir() + "no-such-dir/out.json -- true", "cannot write --json"},
      {"-- true", "the program never initialized CUDA: nothing to audit (true, exit status 0)"},
  };
  for (const Case& c : cases) {
    const CommandResult r = run_command(kCli + " " + c.args);
    EXPECT_EQ(r.exit_code, kExitUsage) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
  const CommandResult missing =
      run_command("RESIDENT_AUDIT_INJECTION=/no/such/inject.so " + kCli + " -- true");
  EXPECT_EQ(missing.exit_code, kExitUsage) << missing.output;
  EXPECT_NE(missing.output.find("tried: /no/such/inject.so ($RESIDENT_AUDIT_INJECTION)"),
            std::string::npos)
      << missing.output;
  const CommandResult help = run_command(kCli + " --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("usage: resident-audit"), std::string::npos);
  EXPECT_NE(help.output.find("exit status"), std::string::npos);

  // The build tree keeps the injection library next to the CLI.
  const std::string cli_dir = kCli.substr(0, kCli.rfind('/'));
  const CommandResult inject = run_command(kCli + " --print-inject-path");
  EXPECT_EQ(inject.exit_code, 0) << inject.output;
  EXPECT_EQ(inject.output, cli_dir + "/" + kInjectionLibraryName + "\n");
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

AuditReport read_report(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return report_from_json(Json::parse(text.str()));
}

// Contract of the planted program's epoch: one scalar readback and its event sync, nothing else.
const char* const kEpochContract = R"({"contracts": [
  {"phase": "epoch", "max_d2h_scalar": 1, "max_d2h_bulk": 0, "max_h2d": 0, "max_syncs": 1}]})";

TEST(AuditCli, AuditsAForeignProgramByNvtxRange) {
  RESIDENT_REQUIRE_GPU();
  const std::string contract = write_file("epoch_contract.json", kEpochContract);
  const std::string json = ::testing::TempDir() + "planted_clean.json";
  const CommandResult r =
      run_command(kCli + " --contract " + contract + " --json " + json + " -- " + kPlanted);
  EXPECT_EQ(r.exit_code, kExitOk) << r.output;
  EXPECT_NE(r.output.find("contract " + contract + ": kept"), std::string::npos) << r.output;
  std::printf("%s", r.output.c_str());

  const AuditReport report = read_report(json);
  const PhaseReport* setup = report.find("setup");
  const PhaseReport* epoch = report.find("epoch");
  const PhaseReport* inner = report.find("epoch/inner");
  const PhaseReport* teardown = report.find("teardown");
  ASSERT_TRUE(setup && epoch && inner && teardown) << format_table(report);
  EXPECT_EQ(setup->counters.h2d, 1u);
  EXPECT_EQ(setup->counters.h2d_bytes, 1u << 20);
  EXPECT_EQ(setup->counters.d2h(), 0u);
  EXPECT_EQ(epoch->counters.d2h_scalar, 1u);
  EXPECT_EQ(epoch->counters.d2h_scalar_bytes, 4u);
  EXPECT_EQ(epoch->counters.d2h_bulk, 0u);
  EXPECT_EQ(epoch->counters.h2d, 0u);
  EXPECT_EQ(epoch->counters.sync_event, 1u);
  EXPECT_EQ(epoch->counters.syncs(), 1u);
  EXPECT_EQ(inner->counters.d2d, 1u);
  EXPECT_EQ(inner->counters.memsets, 1u);
  EXPECT_EQ(inner->counters.d2h(), 0u);
  // The last copy happens just before exit: the exit flush must not lose it.
  EXPECT_EQ(teardown->counters.d2h_bulk, 1u);
  EXPECT_EQ(teardown->counters.d2h_bulk_bytes, 16u * 1024u);
}

TEST(AuditCli, ExitsNonZeroAndNamesTheCallSiteOnViolation) {
  RESIDENT_REQUIRE_GPU();
  const std::string contract = write_file("epoch_contract.json", kEpochContract);
  const std::string json = ::testing::TempDir() + "planted_leak.json";
  const CommandResult r = run_command(kCli + " --contract " + contract + " --json " + json +
                                      " -- " + kPlanted + " --leak");
  EXPECT_EQ(r.exit_code, kExitViolation) << r.output;
  EXPECT_NE(r.output.find("VIOLATED"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("epoch: 1 bulk D2H (64.0 KiB), contract 0; first: cudaMemcpy from "
                          "leak_bulk_copy"),
            std::string::npos)
      << r.output;
  std::printf("%s", r.output.c_str());
  const AuditReport report = read_report(json);
  ASSERT_NE(report.find("epoch"), nullptr);
  EXPECT_EQ(report.find("epoch")->counters.d2h_bulk, 1u);
}

TEST(AuditCli, ReportsAFailingProgram) {
  RESIDENT_REQUIRE_GPU();
  const CommandResult r = run_command(kCli + " -- " + kPlanted + " --fail");
  EXPECT_EQ(r.exit_code, kExitProgramFailed) << r.output;
  EXPECT_NE(r.output.find("exit status 7"), std::string::npos) << r.output;
}

}  // namespace
