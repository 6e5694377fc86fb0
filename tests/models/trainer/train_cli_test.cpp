// resident-train: bad usage (an unknown or repeated option, a malformed value, a config value out
// of its range) exits 2 with one line naming the problem and no source location; errors in the
// data or files exit 1 naming the value; an RL --resume from a missing, unreadable, corrupt or
// foreign checkpoint (another kind, task or config) is refused before the GPU is asked for, and a
// budget it has already spent is bad usage; without a GPU every task exits 4 with one plain line
// (CPU, runs in CI). A short synthetic run, its checkpoint and a resume exit 0 with one progress
// line per epoch; the RL tasks' (CartPole and trading) and the model's --log records match their
// progress lines; a DQN and a PPO CartPole run checkpointed and resumed to a larger budget, and a
// DQN run killed with SIGKILL and resumed, end with the progress lines and log records of one
// uninterrupted run (GPU; skip without one).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lib/core/checkpoint_file.h"
#include "lib/models/model_registry.h"
#include "lib/rl/ppo/ppo_checkpoint.h"
#include "lib/rl/ppo/ppo_config.h"
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
        "--episode-length N", "--cost X", "--env-steps N", "--seed N", "--target R",
        "--checkpoint-every N", "--anneal-steps N"}) {
    const std::size_t at = r.output.find(std::string("  ") + option);
    ASSERT_NE(at, std::string::npos) << "missing " << option << " in\n" << r.output;
    const std::size_t next_option = r.output.find("\n  -", at + 1);
    const std::string entry = r.output.substr(at, next_option - at);
    EXPECT_TRUE(entry.find("default") != std::string::npos ||
                std::regex_search(entry, std::regex(R"(\([^()]*[0-9][^()]*\)\s*$)")))
        << option << " states no default:\n" << entry;
  }
  // The RL checkpoint options (the models' --checkpoint and --resume have their own lines).
  for (const char* const option : {"  --checkpoint DIR   save DIR/trainer.ckpt",
                                   "  --resume           continue from DIR/trainer.ckpt"})
    EXPECT_NE(r.output.find(option), std::string::npos) << "missing " << option << " in\n"
                                                        << r.output;
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
      // The RL checkpoint options (a folder that cannot be created: nothing is written).
      {"dqn-cartpole --resume", "--resume needs --checkpoint DIR"},
      {"ppo-trading --seed 2 --resume", "--resume needs --checkpoint DIR"},
      {"dqn-cartpole --checkpoint /no/such/dir --resume --resume", "--resume given twice"},
      {"dqn-cartpole --checkpoint /no/such/dir --checkpoint-every 0",
       "--checkpoint-every = 0: expected a whole number in [1, 1e15]"},
      {"ppo-cartpole --checkpoint /no/such/dir --checkpoint-every 1.5",
       "--checkpoint-every = 1.5: expected a whole number in [1, 1e15]"},
      {"dqn-trading --checkpoint /no/such/dir --checkpoint-every x",
       "--checkpoint-every = 'x': not a finite number"},
      {"ppo-trading --checkpoint /no/such/dir --checkpoint-every -3",
       "--checkpoint-every = -3: expected a whole number in [1, 1e15]"},
      {"dqn-cartpole --checkpoint /no/such/dir --checkpoint-every",
       "--checkpoint-every needs a value"},
      {"ppo-cartpole --checkpoint-every 5", "--checkpoint-every needs --checkpoint DIR"},
      {"dqn-cartpole --checkpoint ''", "--checkpoint = '': expected a folder"},
      {"dqn-cartpole --anneal-steps 1000", "unknown option --anneal-steps for dqn-cartpole"},
      {"ppo-cartpole --anneal-steps -1", "--anneal-steps = -1: expected a whole number"},
      {"ppo-trading --anneal-steps 1e3x", "--anneal-steps = '1e3x': not a finite number"},
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

// ---------------------------------------------------------------------------------------------
// RL checkpoints

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

void write_bytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

// The config hash of ppo-cartpole at its defaults (PpoConfig's, seed 1) with an annealing horizon
// of `total_updates` (--anneal-steps, default --env-steps, over 512 env steps per update), as
// resident-train builds it.
std::uint64_t ppo_cartpole_hash(std::size_t total_updates) {
  resident::ppo::PpoConfig c;
  c.total_updates = total_updates;
  return resident::ppo::config_hash(c);
}

// A PPO checkpoint's host side as resident-train writes it after `updates` updates: the "config"
// and "trainer" sections and, with `host_task` non-empty, resident-train's own section (u64
// format 1, task, environment, u64 episodes, array<double> last-100 returns), but neither the
// slab nor the env: every check before the GPU passes, the trainer's load on a GPU refuses it.
std::vector<std::byte> ppo_checkpoint(std::uint64_t config_hash, std::uint64_t updates,
                                      const std::string& host_task,
                                      const std::string& environment = "cartpole") {
  resident::CheckpointWriter out = resident::ppo::ppo_checkpoint_writer(config_hash);
  resident::ppo::PpoTrainerState state;
  state.updates_done = updates;
  state.device_counters = {updates * 512, 0, updates * 16};
  std::ostringstream rng;
  rng << std::mt19937_64{};
  state.host_rng = rng.str();
  out.add(resident::ppo::kPpoTrainerSection, resident::ppo::ppo_trainer_section(state));
  if (!host_task.empty()) {
    const std::vector<double> recent(100, 21.5);
    out.add("resident-train", resident::SectionWriter()
                                  .put<std::uint64_t>(1)
                                  .put_string(host_task)
                                  .put_string(environment)
                                  .put<std::uint64_t>(250)
                                  .put_array<double>(recent)
                                  .take());
  }
  return out.serialize();
}

// --resume reads the checkpoint on the host before it asks for a GPU: a missing, unreadable,
// corrupt or foreign file (another kind, task or config) exits 1 naming it and what is wrong
// (without a GPU, anything after the GPU check exits 4), and a budget the checkpoint has already
// spent exits 2. The first runs checkpoint nothing: their folders are never created.
TEST(TrainCli, RlResumeChecksTheCheckpointBeforeTheGpu) {
  const resident::test::TempDir dir("train_cli");
  const auto ckpt = [&](const std::string& name) { return dir / name / "trainer.ckpt"; };
  const auto at = [&](const std::string& name) { return " --checkpoint " + (dir / name).string(); };
  write_text(ckpt("text"), "not a checkpoint at all\n");
  std::filesystem::create_directories(ckpt("folder"));
  std::vector<std::byte> corrupt = ppo_checkpoint(ppo_cartpole_hash(10), 10, "ppo-cartpole");
  corrupt[corrupt.size() / 2] ^= std::byte{0x40};
  write_bytes(ckpt("corrupt"), corrupt);
  write_bytes(ckpt("ppo"), ppo_checkpoint(ppo_cartpole_hash(10), 10, "ppo-cartpole"));
  write_bytes(ckpt("dqn-other-config"),
              resident::CheckpointWriter("dqn-trainer")
                  .add("config", resident::SectionWriter().put<std::uint64_t>(12345).take())
                  .serialize());
  write_bytes(ckpt("ppo-other-config"), ppo_checkpoint(12345, 10, "ppo-cartpole"));
  write_bytes(ckpt("ppo-other-task"), ppo_checkpoint(ppo_cartpole_hash(10), 10, "ppo-trading",
                                                     R"({"market":"synthetic"})"));
  write_bytes(ckpt("ppo-no-host"), ppo_checkpoint(ppo_cartpole_hash(10), 10, ""));

  struct Case {
    std::string arguments;
    int status;
    std::vector<std::string> messages;
  };
  const std::string other = "was written by another task or config; resume with the options of "
                            "the run that wrote it";
  const std::vector<Case> cases = {
      {"dqn-cartpole --resume" + at("none"), 1,
       {"--resume: " + ckpt("none").string() + " does not exist"}},
      {"ppo-trading --resume" + at("none"), 1, {ckpt("none").string() + " does not exist"}},
      {"dqn-trading --resume" + at("text"), 1,
       {"read_checkpoint(\"" + ckpt("text").string() + "\")", "not a checkpoint"}},
      {"ppo-cartpole --resume" + at("text"), 1, {ckpt("text").string(), "not a checkpoint"}},
      {"dqn-cartpole --resume" + at("folder"), 1,
       {ckpt("folder").string(), "I/O error (is a directory)"}},
      {"ppo-cartpole --env-steps 10240 --anneal-steps 5120 --resume" + at("corrupt"), 1,
       {ckpt("corrupt").string(), "corrupt checkpoint"}},
      // Another kind: a PPO file for a DQN task.
      {"dqn-cartpole --resume" + at("ppo"), 1,
       {ckpt("ppo").string() + " " + other, "checkpoint kind mismatch",
        "the file is a \"ppo-trainer\" checkpoint, expected \"dqn-trainer\""}},
      // Another config of the same kind.
      {"dqn-trading --resume" + at("dqn-other-config"), 1,
       {ckpt("dqn-other-config").string() + " " + other, "config hash 12345 in the file"}},
      {"ppo-cartpole --env-steps 10240 --anneal-steps 5120 --resume" + at("ppo-other-config"), 1,
       {other + " (PPO: --anneal-steps, default --env-steps, is part of the config)",
        "config hash 12345 in the file"}},
      // A horizon other than the one the checkpoint was written with: --anneal-steps defaults to
      // --env-steps (10240: 20 updates; the file's is 10).
      {"ppo-cartpole --env-steps 10240 --resume" + at("ppo"), 1,
       {other + " (PPO: --anneal-steps", "config hash " + std::to_string(ppo_cartpole_hash(10)) +
                                             " in the file, " +
                                             std::to_string(ppo_cartpole_hash(20))}},
      // Another task, whose file resident-train tells by its own section.
      {"ppo-cartpole --env-steps 10240 --anneal-steps 5120 --resume" + at("ppo-other-task"), 1,
       {"--resume: " + ckpt("ppo-other-task").string() +
        " was written by ppo-trading on {\"market\":\"synthetic\"}, this run is ppo-cartpole on "
        "cartpole"}},
      {"ppo-cartpole --env-steps 10240 --anneal-steps 5120 --resume" + at("ppo-no-host"), 1,
       {ckpt("ppo-no-host").string() + " has no \"resident-train\" section"}},
      // The checkpoint holds 10 updates of 512 env steps: a budget of 10 or fewer is spent.
      {"ppo-cartpole --env-steps 5120 --resume" + at("ppo"), 2,
       {"--env-steps = 5120: " + ckpt("ppo").string() +
        " has 10 updates (5120 env steps) done; give a larger budget to continue"}},
      {"ppo-cartpole --env-steps 5600 --anneal-steps 5120 --resume" + at("ppo"), 2,
       {"--env-steps = 5600: " + ckpt("ppo").string() + " has 10 updates (5120 env steps) done"}},
      // --log on --resume appends to its file, which must be openable.
      {"ppo-cartpole --env-steps 10240 --anneal-steps 5120 --resume" + at("ppo") + " --log " +
           (dir / "no" / "x.jsonl").string(),
       1, {(dir / "no" / "x.jsonl").string() + ": No such file or directory"}},
  };
  for (const Case& c : cases) {
    const CliRun r = run(c.arguments);
    EXPECT_EQ(r.status, c.status) << c.arguments << "\n" << r.output;
    for (const std::string& message : c.messages)
      EXPECT_NE(r.output.find(message), std::string::npos)
          << c.arguments << ": missing \"" << message << "\" in\n"
          << r.output;
    if (c.status == 2) {
      EXPECT_FALSE(names_a_source_file(r.output)) << c.arguments << "\n" << r.output;
    }
  }
  // A checkpoint that passes every host check: without a GPU the run stops at the GPU check;
  // with one the trainer's own load refuses the file, which holds no slab.
  std::string reason;
  const bool gpu = resident::test::gpu_available(&reason);
  const CliRun r = run("ppo-cartpole --env-steps 10240 --anneal-steps 5120 --resume" + at("ppo"));
  EXPECT_EQ(r.status, gpu ? 1 : 4) << r.output;
  EXPECT_NE(r.output.find(gpu ? "missing section" : "no NVIDIA GPU found"), std::string::npos)
      << r.output;
  // None of these runs created a checkpoint folder.
  EXPECT_FALSE(std::filesystem::exists(dir / "none"));
}

// A progress line or a log record without its wall-clock time (", 12.3 s" at the line's end,
// "wall_s":12.3 in a record), which differs between two runs of the same computation.
std::string without_time(const std::string& text) {
  static const std::regex line_time(R"(, [0-9.]+ s$)");
  static const std::regex record_time(R"("wall_s":[^,}]*)");
  return std::regex_replace(std::regex_replace(text, line_time, ""), record_time, "\"wall_s\"");
}

// The progress lines of a run's output ("<algo> seed N: ... env steps, ..."), without their time.
std::vector<std::string> progress_lines(const std::string& output) {
  std::vector<std::string> out;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (line.find(" seed ") != std::string::npos && line.find(" env steps, ") != std::string::npos)
      out.push_back(without_time(line));
  return out;
}

// A DQN and a PPO CartPole run checkpointed, then resumed to a larger budget, print the progress
// lines and write the log records (header aside) of one uninterrupted run to that budget, bit for
// bit but for the wall-clock times: the printed last-100 mean and losses and the records' values.
// DQN: epochs of 4,000 env steps, a line every 10; 40,000 then 48,000 env steps, one line each;
// the reference prints both. PPO: updates of 512 env steps, a line at the first and the last;
// 18 updates then 20, so the resumed updates' last-100 window spans both runs; the first run
// anneals over the final 20 updates (--anneal-steps 10240), as the reference does.
TEST(TrainCli, RlResumeToALargerBudgetContinuesBitIdentically) {
  RESIDENT_REQUIRE_GPU();
  const resident::test::TempDir dir("train_cli");
  struct Case {
    std::string task, first, resumed, reference, resumed_line;
    std::size_t done;  // epochs or updates in the first run's checkpoint
  };
  const std::vector<Case> cases = {
      {"dqn-cartpole", "dqn-cartpole --seed 2 --checkpoint-every 4 --env-steps 40000",
       "dqn-cartpole --seed 2 --checkpoint-every 4 --env-steps 48000 --resume",
       "dqn-cartpole --seed 2 --env-steps 48000", "after epoch 10 (40000 env steps)", 10},
      {"ppo-cartpole",
       "ppo-cartpole --seed 2 --checkpoint-every 4 --env-steps 9216 --anneal-steps 10240",
       "ppo-cartpole --seed 2 --checkpoint-every 4 --env-steps 10240 --resume",
       "ppo-cartpole --seed 2 --env-steps 10240", "after update 18 (9216 env steps)", 18},
  };
  for (const Case& c : cases) {
    const std::string folder = (dir / c.task).string();
    const std::string log = (dir / (c.task + ".jsonl")).string();
    const std::string reference_log = (dir / (c.task + "-reference.jsonl")).string();
    const std::string saving = " --checkpoint " + folder + " --log " + log;
    const CliRun first = run(c.first + saving);
    std::printf("%s", first.output.c_str());
    EXPECT_TRUE(first.status == 0 || first.status == 3) << c.first << "\n" << first.output;
    EXPECT_TRUE(std::filesystem::exists(dir / c.task / "trainer.ckpt")) << c.first;
    EXPECT_FALSE(std::filesystem::exists(dir / c.task / "trainer.ckpt.staged")) << c.first;
    const CliRun resumed = run(c.resumed + saving);
    std::printf("%s", resumed.output.c_str());
    EXPECT_NE(resumed.output.find(c.task + ": resumed from " + folder + "/trainer.ckpt " +
                                  c.resumed_line),
              std::string::npos)
        << resumed.output;
    const CliRun reference = run(c.reference + " --log " + reference_log);
    std::printf("%s", reference.output.c_str());
    EXPECT_EQ(resumed.status, reference.status) << resumed.output << reference.output;

    // Output: the first run's first line is the reference's first (DQN: its only one), the
    // resumed run's one line the reference's last.
    const std::vector<std::string> a = progress_lines(first.output);
    const std::vector<std::string> b = progress_lines(resumed.output);
    const std::vector<std::string> ref = progress_lines(reference.output);
    ASSERT_EQ(ref.size(), 2u) << reference.output;
    ASSERT_FALSE(a.empty()) << first.output;
    ASSERT_EQ(b.size(), 1u) << resumed.output;
    EXPECT_EQ(a.front(), ref.front());
    EXPECT_EQ(b.back(), ref.back());

    // The log: the first run's header, its lines and end; then (appended) a header that says
    // where it resumed, the resumed line and end. The reference: header, 2 lines, end.
    const std::vector<std::string> lines = lines_of(log);
    const std::vector<std::string> ref_lines = lines_of(reference_log);
    ASSERT_EQ(ref_lines.size(), 4u) << reference_log;
    ASSERT_EQ(lines.size(), a.size() + 5) << log;
    const std::size_t second_header = a.size() + 2;
    EXPECT_TRUE(has(lines[second_header], R"("record":"header")") &&
                has(lines[second_header],
                    std::string(c.task[0] == 'd' ? R"("resumed_after_epoch":)"
                                                 : R"("resumed_after_update":)") +
                        std::to_string(c.done) + ",") &&
                has(lines[second_header], R"("checkpoint":")" + folder + "\""))
        << lines[second_header];
    EXPECT_TRUE(has(lines[0], c.task[0] == 'd' ? R"("resumed_after_epoch":0,)"
                                               : R"("resumed_after_update":0,)"))
        << lines[0];
    EXPECT_EQ(without_time(lines[1]), without_time(ref_lines[1]));
    EXPECT_EQ(without_time(lines[second_header + 1]), without_time(ref_lines[2]));
    EXPECT_EQ(without_time(lines.back()), without_time(ref_lines.back()));
  }
}

// A DQN run killed with SIGKILL right after its epoch-10 progress record (a checkpoint after
// every epoch) leaves a whole checkpoint of epoch 9 or later (at most one period lost: the
// epoch's line is written before its checkpoint); --resume continues from it to 80,000 env
// steps (20 epochs) and ends with the progress line and end record of one uninterrupted run.
TEST(TrainCli, RlRunKilledMidRunResumesFromItsLastCheckpoint) {
  RESIDENT_REQUIRE_GPU();
  const resident::test::TempDir dir("train_cli");
  const std::string folder = (dir / "ckpt").string();
  const std::filesystem::path log = dir / "killed.jsonl";
  const std::string common = "dqn-cartpole --seed 2 --checkpoint " + folder + " --log " +
                             log.string();
  // Far more env steps than the run lives: it is killed, it never finishes.
  const std::string command = std::string("exec ") + RESIDENT_TRAIN_BINARY + " " + common +
                              " --checkpoint-every 1 --env-steps 4000000 > " +
                              (dir / "killed.out").string() + " 2>&1";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  bool progress = false;
  int raw = 0;
  bool exited = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (!progress && !exited && std::chrono::steady_clock::now() < deadline) {
    for (const std::string& line : lines_of(log))
      progress = progress || has(line, R"("record":"progress")");
    if (progress) break;
    exited = ::waitpid(child, &raw, WNOHANG) == child;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!exited) {
    ::kill(child, SIGKILL);
    ASSERT_EQ(::waitpid(child, &raw, 0), child);
  }
  std::ifstream out(dir / "killed.out");
  const std::string killed_output((std::istreambuf_iterator<char>(out)),
                                  std::istreambuf_iterator<char>());
  std::printf("%s", killed_output.c_str());
  ASSERT_TRUE(progress) << "no progress record before the run ended or 5 minutes passed\n"
                        << killed_output;
  EXPECT_TRUE(WIFSIGNALED(raw) && WTERMSIG(raw) == SIGKILL) << killed_output;
  ASSERT_TRUE(std::filesystem::exists(dir / "ckpt" / "trainer.ckpt"));

  const CliRun resumed = run(common + " --env-steps 80000 --resume");
  std::printf("%s", resumed.output.c_str());
  std::smatch from;
  const std::regex resumed_line("dqn-cartpole: resumed from " + folder +
                                R"(/trainer\.ckpt after epoch ([0-9]+) \(([0-9]+) env steps\))");
  ASSERT_TRUE(std::regex_search(resumed.output, from, resumed_line)) << resumed.output;
  const std::size_t epoch = std::stoul(from[1].str());
  EXPECT_GE(epoch, 9u) << "more than one period lost";
  EXPECT_LT(epoch, 20u) << "the killed run got within the resumed budget";
  EXPECT_EQ(std::stoul(from[2].str()), epoch * 4000);

  const std::filesystem::path reference_log = dir / "reference.jsonl";
  const CliRun reference =
      run("dqn-cartpole --seed 2 --env-steps 80000 --log " + reference_log.string());
  std::printf("%s", reference.output.c_str());
  EXPECT_EQ(resumed.status, reference.status);
  const std::vector<std::string> b = progress_lines(resumed.output);
  const std::vector<std::string> ref = progress_lines(reference.output);
  ASSERT_FALSE(b.empty()) << resumed.output;
  ASSERT_FALSE(ref.empty()) << reference.output;
  EXPECT_EQ(b.back(), ref.back());

  // The log: the killed run's header and epoch-10 record and no end record, then the resumed
  // run's header saying where it resumed, its records and its end, that of the reference.
  const std::vector<std::string> lines = lines_of(log);
  const std::vector<std::string> ref_lines = lines_of(reference_log);
  ASSERT_GE(lines.size(), 5u) << log;
  EXPECT_TRUE(has(lines[0], R"("record":"header")") && has(lines[0], R"("resumed_after_epoch":0,)"))
      << lines[0];
  EXPECT_TRUE(has(lines[1], R"("record":"progress")") && has(lines[1], R"("env_steps":40000,)"))
      << lines[1];
  EXPECT_TRUE(has(lines[2], R"("record":"header")") &&
              has(lines[2], R"("resumed_after_epoch":)" + std::to_string(epoch) + ","))
      << lines[2];
  ASSERT_FALSE(ref_lines.empty());
  EXPECT_EQ(without_time(lines[lines.size() - 2]), without_time(ref_lines[ref_lines.size() - 2]));
  EXPECT_EQ(without_time(lines.back()), without_time(ref_lines.back()));
}

}  // namespace
