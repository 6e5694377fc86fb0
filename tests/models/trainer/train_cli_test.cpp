// resident-train for the supervised models: bad usage exits 2 naming the problem, errors in the
// data or the config exit 1 naming the value (CPU, runs in CI); a short synthetic run, its
// checkpoint and a resume exit 0 with one progress line per epoch (GPU; skips without one).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "lib/models/model_registry.h"
#include "tests/support/gpu.h"
#include "tests/support/temp_dir.h"

namespace {

struct CliRun {
  int status = -1;
  std::string output;  // stdout and stderr
};

CliRun run(const std::string& arguments) {
  const std::string command = std::string(RESIDENT_TRAIN_BINARY) + " " + arguments + " 2>&1";
  CliRun r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    r.output.append(buffer.data(), n);
  const int raw = ::pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

std::string any_model() {
  const std::vector<std::string> names = resident::models::supervised_model_names();
  return names.empty() ? std::string() : names.front();
}

TEST(TrainCli, HelpListsTheModelsAndTheRlTasks) {
  const CliRun r = run("--help");
  EXPECT_EQ(r.status, 0);
  for (const std::string& part :
       {std::string("dqn-cartpole"), std::string("ppo-cartpole"), std::string("--target-columns"),
        std::string("MODEL is one of: ")})
    EXPECT_NE(r.output.find(part), std::string::npos) << "missing " << part << " in\n" << r.output;
  for (const std::string& name : resident::models::supervised_model_names())
    EXPECT_NE(r.output.find(name), std::string::npos) << name;
}

TEST(TrainCli, BadUsageExitsTwoNamingTheProblem) {
  struct Case {
    std::string arguments, message;
  };
  std::vector<Case> cases = {
      {"", "missing TASK"},
      {"no-such-model --synthetic", "unknown TASK 'no-such-model'"},
      {"dqn-cartpole --bogus 1", "unknown option --bogus for dqn-cartpole"},
  };
  const std::string m = any_model();
  if (!m.empty()) {
    cases.push_back({m, "give exactly one of --synthetic and --csv FILE"});
    cases.push_back({m + " --synthetic --csv a.csv", "give exactly one of --synthetic and --csv"});
    cases.push_back({m + " --csv a.csv", "--csv needs --target-columns"});
    cases.push_back({m + " --synthetic --target-columns a", "need --csv"});
    cases.push_back({m + " --synthetic --epochs abc", "--epochs = 'abc': not a finite number"});
    cases.push_back({m + " --synthetic --batch -3", "--batch = -3: expected a whole number"});
    cases.push_back({m + " --synthetic --resume", "--resume needs --checkpoint DIR"});
    cases.push_back({m + " --synthetic --bogus 3", "unknown option --bogus for model " + m});
    cases.push_back({m + " --synthetic --window", "--window needs a value"});
    cases.push_back({m + " --synthetic stray", "expected an option, got 'stray'"});
  }
  for (const Case& c : cases) {
    const CliRun r = run(c.arguments);
    EXPECT_EQ(r.status, 2) << c.arguments << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos)
        << c.arguments << ": missing \"" << c.message << "\" in\n"
        << r.output;
  }
  if (m.empty()) GTEST_SKIP() << "no supervised model is registered: only the generic cases ran";
}

TEST(TrainCli, DataAndConfigErrorsExitOneNamingTheValue) {
  const std::string m = any_model();
  if (m.empty()) GTEST_SKIP() << "no supervised model is registered";
  const resident::test::TempDir dir("train_cli");
  {
    FILE* f = std::fopen((dir / "p.csv").c_str(), "w");
    std::fputs("date,close,volume\nd0,10,1\nd1,11,2\nd2,12,3\n", f);
    std::fclose(f);
  }
  struct Case {
    std::string arguments, message;
  };
  const std::vector<Case> cases = {
      {m + " --synthetic --batch 0", "batch = 0, allowed [1, 65536]"},
      {m + " --synthetic --validation-fraction 1.5", "validation_fraction = 1.5, allowed (0, 1)"},
      {m + " --csv /no/such/file.csv --target-columns close", "cannot open file"},
      {m + " --csv " + (dir / "p.csv").string() + " --target-columns price",
       "no column named \"price\" (target_columns)"},
      {m + " --synthetic --steps 100 --window 200", "window longer than the series"},
      {m + " --synthetic --checkpoint " + (dir / "none").string() + " --resume",
       "trainer.ckpt does not exist"},
  };
  for (const Case& c : cases) {
    const CliRun r = run(c.arguments);
    EXPECT_EQ(r.status, 1) << c.arguments << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos)
        << c.arguments << ": missing \"" << c.message << "\" in\n"
        << r.output;
  }
}

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(TrainCli, ShortSyntheticRunCheckpointAndResume) {
  RESIDENT_REQUIRE_GPU();
  const std::string m = any_model();
  if (m.empty()) GTEST_SKIP() << "no supervised model is registered";
  const resident::test::TempDir dir("train_cli");
  const std::string common = m + " --synthetic --steps 3000 --window 32 --batch 32 --checkpoint " +
                             (dir / "ckpt").string();
  CliRun r = run(common + " --epochs 2");
  std::printf("%s", r.output.c_str());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(count_of(r.output, m + " epoch "), 2u) << r.output;
  EXPECT_NE(r.output.find("windows/s"), std::string::npos);
  r = run(common + " --epochs 3 --resume");
  std::printf("%s", r.output.c_str());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(m + " epoch 3:"), std::string::npos) << r.output;
  EXPECT_EQ(count_of(r.output, m + " epoch "), 1u) << r.output;
  r = run(common + " --epochs 1 --host-fed");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("host-fed pipeline"), std::string::npos) << r.output;
}

}  // namespace
