// resident-train: bad usage (an unknown or repeated option, a malformed value, a config value out
// of its range) exits 2 with one line naming the problem and no source location; errors in the
// data or files exit 1 naming the value; without a GPU every task exits 4 with one plain line
// (CPU, runs in CI). A short synthetic run, its checkpoint and a resume exit 0 with one progress
// line per epoch, and the RL tasks' (CartPole and trading) and the model's --log records match
// their progress lines (GPU; skip without one).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <regex>
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

// A "file.cpp:123"-style location, which bad usage must not print.
bool names_a_source_file(const std::string& text) {
  static const std::regex location(R"([A-Za-z0-9_/]+\.(cpp|cu|h|cuh):[0-9]+)");
  return std::regex_search(text, location);
}

std::string any_model() {
  const std::vector<std::string> names = resident::models::supervised_model_names();
  return names.empty() ? std::string() : names.front();
}

TEST(TrainCli, HelpListsTheModelsAndTheRlTasks) {
  const CliRun r = run("--help");
  EXPECT_EQ(r.status, 0);
  for (const std::string& part :
       {std::string("dqn-cartpole"), std::string("ppo-cartpole"), std::string("dqn-trading"),
        std::string("ppo-trading"), std::string("--target-columns"),
        std::string("MODEL is one of: ")})
    EXPECT_NE(r.output.find(part), std::string::npos) << "missing " << part << " in\n" << r.output;
  for (const std::string& name : resident::models::supervised_model_names())
    EXPECT_NE(r.output.find(name), std::string::npos) << name;
  // Every RL option on a line of its own that states its default.
  for (const char* const option :
       {"--alpha X", "--beta-start X", "--beta-max X", "--beta-steps N", "--priority-epsilon X",
        "--market-seed N", "--market-steps N", "--signal-strength X", "--window N",
        "--episode-length N", "--cost X", "--env-steps N", "--seed N", "--target R"}) {
    const std::size_t at = r.output.find(std::string("  ") + option);
    ASSERT_NE(at, std::string::npos) << "missing " << option << " in\n" << r.output;
    const std::size_t next_option = r.output.find("\n  -", at + 1);
    const std::string entry = r.output.substr(at, next_option - at);
    EXPECT_TRUE(entry.find("default") != std::string::npos ||
                std::regex_search(entry, std::regex(R"(\([^()]*[0-9][^()]*\)\s*$)")))
        << option << " states no default:\n" << entry;
  }
}

TEST(TrainCli, BadUsageExitsTwoNamingTheProblem) {
  struct Case {
    std::string arguments, message;
  };
  std::vector<Case> cases = {
      {"", "missing TASK"},
      {"no-such-model --synthetic", "unknown TASK 'no-such-model'"},
      {"dqn-cartpole --bogus 1", "unknown option --bogus for dqn-cartpole"},
      {"dqn-cartpole --bogus", "unknown option --bogus for dqn-cartpole"},
      {"dqn-cartpole --seed 2 --bogus", "unknown option --bogus for dqn-cartpole"},
      {"ppo-cartpole --bogus", "unknown option --bogus for ppo-cartpole"},
      {"ppo-cartpole --tau 0.5", "unknown option --tau for ppo-cartpole"},
      {"dqn-cartpole --seed", "--seed needs a value"},
      {"dqn-cartpole --seed 1 --seed 2", "--seed given twice"},
      {"dqn-cartpole stray", "expected an option, got 'stray'"},
      {"dqn-cartpole --tau x", "--tau = 'x': not a finite number"},
      {"dqn-cartpole --hidden 64,-1", "--hidden = -1: expected a whole number"},
      {"ppo-cartpole --target nan", "--target = 'nan': not a finite number"},
      // Values the config's validate() refuses: the field, the value and the allowed range.
      {"dqn-cartpole --tau 2", "invalid dqn-cartpole config: tau = 2, allowed (0, 1]"},
      {"dqn-cartpole --tau 0", "tau = 0, allowed (0, 1]"},
      {"dqn-cartpole --batch 0", "batch = 0, allowed [1, 65536]"},
      {"dqn-cartpole --replay 10", "replay_capacity = 10, allowed [batch, 2^30]"},
      {"ppo-cartpole --envs 0", "invalid ppo-cartpole config: env_count = 0"},
      {"ppo-cartpole --lr -1", "invalid ppo-cartpole config: learning_rate = -1"},
      // The trading tasks and the replay options.
      {"dqn-trading --bogus 1", "unknown option --bogus for dqn-trading"},
      {"ppo-trading --bogus", "unknown option --bogus for ppo-trading"},
      {"ppo-trading --alpha 0.5", "unknown option --alpha for ppo-trading"},
      {"ppo-cartpole --beta-start 0.5", "unknown option --beta-start for ppo-cartpole"},
      {"dqn-cartpole --market-seed 3", "unknown option --market-seed for dqn-cartpole"},
      {"ppo-cartpole --window 4", "unknown option --window for ppo-cartpole"},
      {"dqn-trading --window 4 --window 5", "--window given twice"},
      {"dqn-trading --alpha", "--alpha needs a value"},
      {"dqn-trading --alpha x", "--alpha = 'x': not a finite number"},
      {"dqn-cartpole --beta-steps 1.5", "--beta-steps = 1.5: expected a whole number"},
      {"dqn-trading --market-steps -2", "--market-steps = -2: expected a whole number"},
      {"ppo-trading --cost inf", "--cost = 'inf': not a finite number"},
      {"dqn-trading --alpha -1",
       "invalid dqn-trading config: priority_alpha = -1, allowed finite, >= 0"},
      {"dqn-cartpole --alpha -0.5", "invalid dqn-cartpole config: priority_alpha = -0.5"},
      {"dqn-trading --beta-start 1.5", "beta_start = 1.5, allowed [0, 1]"},
      {"dqn-trading --beta-start 0.5 --beta-max 0.25", "beta_max = 0.25, allowed [beta_start, 1]"},
      {"dqn-trading --beta-max 2", "beta_max = 2, allowed [beta_start, 1]"},
      {"dqn-trading --priority-epsilon 0", "priority_epsilon = 0, allowed finite, > 0"},
      {"dqn-trading --priority-epsilon -1", "priority_epsilon = -1, allowed finite, > 0"},
      {"dqn-trading --window 0", "invalid dqn-trading config: trading.window = 0, allowed >= 1"},
      {"dqn-trading --episode-length 0", "trading.episode_length = 0, allowed >= 1"},
      {"dqn-trading --market-steps 50",
       "trading.market.steps = 50, allowed >= trading.window + trading.episode_length"},
      {"dqn-trading --cost -1", "trading.cost_per_unit = -1, allowed finite, >= 0"},
      {"dqn-trading --signal-strength 2", "signal_strength = 2, allowed [0, 1]"},
      {"dqn-trading --batch 0", "invalid dqn-trading config: batch = 0, allowed [1, 65536]"},
      {"ppo-trading --window 0", "invalid ppo-trading env config: window = 0, allowed >= 1"},
      {"ppo-trading --market-steps 50", "market.steps = 50, allowed >= window + episode_length"},
      {"ppo-trading --signal-strength -1", "signal_strength = -1, allowed [0, 1]"},
      {"ppo-trading --envs 0", "invalid ppo-trading config: env_count = 0"},
      {"ppo-trading --lr 0", "invalid ppo-trading config: learning_rate = 0"},
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
    cases.push_back({m + " --synthetic --bogus", "unknown option --bogus for model " + m});
    cases.push_back({m + " --synthetic --seed 1 --seed 1", "--seed given twice"});
    cases.push_back({m + " --synthetic --batch 0",
                     "invalid model " + m + " config: batch = 0, allowed [1, 65536]"});
    cases.push_back({m + " --synthetic --validation-fraction 1.5",
                     "validation_fraction = 1.5, allowed (0, 1)"});
  }
  for (const Case& c : cases) {
    const CliRun r = run(c.arguments);
    EXPECT_EQ(r.status, 2) << c.arguments << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos)
        << c.arguments << ": missing \"" << c.message << "\" in\n"
        << r.output;
    EXPECT_FALSE(names_a_source_file(r.output)) << c.arguments << "\n" << r.output;
  }
  if (m.empty()) GTEST_SKIP() << "no supervised model is registered: only the generic cases ran";
}

TEST(TrainCli, DataAndFileErrorsExitOneNamingTheValue) {
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
      {m + " --csv /no/such/file.csv --target-columns close", "cannot open file"},
      {m + " --csv " + (dir / "p.csv").string() + " --target-columns price",
       "no column named \"price\" (target_columns)"},
      {m + " --synthetic --steps 100 --window 200", "window longer than the series"},
      {m + " --synthetic --checkpoint " + (dir / "none").string() + " --resume",
       "trainer.ckpt does not exist"},
      {m + " --synthetic --log " + (dir / "no" / "x.jsonl").string(),
       (dir / "no" / "x.jsonl").string() + ": No such file or directory"},
      {"dqn-cartpole --log " + (dir / "no" / "x.jsonl").string(),
       (dir / "no" / "x.jsonl").string() + ": No such file or directory"},
  };
  for (const Case& c : cases) {
    const CliRun r = run(c.arguments);
    EXPECT_EQ(r.status, 1) << c.arguments << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos)
        << c.arguments << ": missing \"" << c.message << "\" in\n"
        << r.output;
  }
}

TEST(TrainCli, WithoutAGpuEachTaskPrintsOnePlainLine) {
  std::string reason;
  if (resident::test::gpu_available(&reason)) GTEST_SKIP() << "a GPU is present";
  std::vector<std::string> runs = {"dqn-cartpole", "ppo-cartpole --seed 2", "dqn-trading",
                                   "ppo-trading", "dqn-cartpole --alpha 0 --beta-steps 0",
                                   "dqn-trading --alpha 0.7 --beta-start 0.5 --beta-max 0.9 "
                                   "--beta-steps 1000 --priority-epsilon 1e-3 --signal-strength 0",
                                   "ppo-trading --window 8 --episode-length 50 --cost 0"};
  for (const std::string& m : resident::models::supervised_model_names())
    runs.push_back(m + " --synthetic --steps 2000 --window 16");
  for (const std::string& arguments : runs) {
    const CliRun r = run(arguments);
    EXPECT_EQ(r.status, 4) << arguments << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("resident-train: no NVIDIA GPU found (", 0), 0u)
        << arguments << "\n" << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << arguments << ": one line\n"
                                                        << r.output;
    EXPECT_FALSE(names_a_source_file(r.output)) << arguments << "\n" << r.output;
  }
}

std::vector<std::string> lines_of(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool has(const std::string& line, const std::string& part) {
  return line.find(part) != std::string::npos;
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
                             (dir / "ckpt").string() + " --log " + (dir / "log.jsonl").string();
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
  // The log: the first run's header, 2 epochs and end, then (appended by --resume) a header
  // that says where it resumed, epoch 3 and end.
  const std::vector<std::string> log = lines_of(dir / "log.jsonl");
  ASSERT_EQ(log.size(), 7u);
  EXPECT_TRUE(has(log[0], R"("record":"header")") && has(log[0], R"("kind":"supervised")") &&
              has(log[0], R"("task":")" + m + "\"") && has(log[0], R"("commit":")"))
      << log[0];
  EXPECT_TRUE(has(log[1], R"("record":"epoch")") && has(log[1], R"("epoch":1,)") &&
              has(log[1], R"("validation_loss":)") && has(log[1], R"("windows_per_second":)"))
      << log[1];
  EXPECT_TRUE(has(log[2], R"("epoch":2,)")) << log[2];
  EXPECT_TRUE(has(log[3], R"("record":"end")")) << log[3];
  EXPECT_TRUE(has(log[4], R"("resumed_after_epoch":2)")) << log[4];
  EXPECT_TRUE(has(log[5], R"("epoch":3,)")) << log[5];
  EXPECT_TRUE(has(log[6], R"("record":"end")")) << log[6];
  r = run(common + " --epochs 1 --host-fed");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("host-fed pipeline"), std::string::npos) << r.output;
}

// Short RL runs: one log record per progress line between a header and an end record, and the
// exit status saying whether the target was reached; a trading run without --target spends its
// budget and exits 0, its end record without "reached". Trading budgets: 2 DQN epochs of 16,000
// env steps (training starts after 5,000), 3 and 2 PPO updates of 16,384.
TEST(TrainCli, RlRunsLogTheirProgressLines) {
  RESIDENT_REQUIRE_GPU();
  const resident::test::TempDir dir("train_cli");
  struct Case {
    std::string arguments, task, progress;
    int status;  // -1: 0 or 3 (whether CartPole's target is reached this early is not tested)
    bool target;
  };
  const std::vector<Case> cases = {
      // CartPole DQN epochs are 4,000 env steps and a line prints every 10 epochs: 48,000 env
      // steps give two (40,000 and the budget's end).
      {"dqn-cartpole --seed 2 --env-steps 48000", "dqn-cartpole", "dqn seed 2: ", -1, true},
      {"ppo-cartpole --seed 2 --env-steps 26112", "ppo-cartpole", "ppo seed 2: ", -1, true},
      {"dqn-trading --env-steps 32000", "dqn-trading", "dqn seed 5: ", 0, false},
      {"dqn-trading --seed 2 --env-steps 32000 --alpha 0 --beta-start 1 --beta-steps 0 "
       "--priority-epsilon 1e-3",
       "dqn-trading", "dqn seed 2: ", 0, false},
      {"ppo-trading --env-steps 49152", "ppo-trading", "ppo seed 3: ", 0, false},
      // A target no policy reaches this early (a 100% log return per episode): exit 3.
      {"ppo-trading --seed 2 --env-steps 32768 --target 1", "ppo-trading", "ppo seed 2: ", 3,
       true},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::filesystem::path path = dir / (c.task + "-" + std::to_string(n++) + ".jsonl");
    const CliRun r = run(c.arguments + " --log " + path.string());
    std::printf("%s", r.output.c_str());
    if (c.status < 0) {
      EXPECT_TRUE(r.status == 0 || r.status == 3) << c.arguments << "\n" << r.output;
    } else {
      EXPECT_EQ(r.status, c.status) << c.arguments << "\n" << r.output;
    }
    EXPECT_NE(r.output.find(c.progress), std::string::npos) << c.arguments << "\n" << r.output;
    const std::vector<std::string> log = lines_of(path);
    const std::size_t progress = count_of(r.output, " env steps, ");
    EXPECT_GE(progress, 2u) << c.arguments << "\n" << r.output;
    ASSERT_EQ(log.size(), progress + 2) << c.arguments;
    EXPECT_TRUE(has(log[0], R"("record":"header")") && has(log[0], R"("kind":"rl")") &&
                has(log[0], R"("task":")" + c.task + "\"") && has(log[0], R"("config":{)"))
        << log[0];
    if (c.task == "dqn-trading") {
      EXPECT_TRUE(has(log[0], R"("market":"synthetic")") && has(log[0], R"("priority_alpha":)"))
          << log[0];
    }
    for (std::size_t i = 1; i + 1 < log.size(); ++i)
      EXPECT_TRUE(has(log[i], R"("record":"progress","task":")" + c.task) &&
                  has(log[i], R"("env_steps":)") && has(log[i], R"("mean_return_100":)") &&
                  has(log[i], R"("wall_s":)") && !has(log[i], "nan") && !has(log[i], "null"))
          << log[i];
    EXPECT_TRUE(has(log.back(), R"("record":"end")")) << log.back();
    if (c.target) {
      EXPECT_TRUE(has(log.back(), r.status == 0 ? R"("reached":true)" : R"("reached":false)"))
          << log.back();
    } else {
      EXPECT_FALSE(has(log.back(), R"("reached")")) << log.back();
    }
  }
}

}  // namespace
