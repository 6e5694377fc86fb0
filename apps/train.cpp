// resident-train: trains one agent or one supervised time-series model on the GPU and prints
// its progress, e.g.
//   resident-train dqn-cartpole --seed 3 --lr 2.5e-4 --log runs/dqn-3.jsonl
//   resident-train ppo-cartpole --seed 1 --env-steps 1000000
//   resident-train dqn-trading --alpha 0 --signal-strength 0.5 --log runs/dqn-trading.jsonl
//   resident-train dqn-cartpole --env-steps 64000 --checkpoint runs/dqn
//   resident-train dqn-cartpole --env-steps 128000 --checkpoint runs/dqn --resume
//   resident-train kan --synthetic --epochs 20
//   resident-train mamba2 --csv prices.csv --target-columns close --checkpoint ckpt --resume
// RL tasks stop when the mean return of the last 100 episodes reaches --target (CartPole default
// 475; the trading tasks have none by default), or when --env-steps are spent. A model trains
// until --epochs or early stopping (--patience), then keeps its best validation epoch's
// parameters. `--log FILE` writes a header record and one JSON line per progress line
// (reports/curves draws them), each flushed as it is written. `--checkpoint DIR` saves
// DIR/trainer.ckpt atomically (RL: every --checkpoint-every epochs or updates and at the end; a
// model: after every epoch); `--resume` continues from it bit-identically, appending to the log.
// Exit status: 0 when the target was reached (RL), an RL run without a target spent its budget,
// or training finished (models); 3 when an RL target was not reached; 2 on bad usage (a bad
// option or a config value out of its range: one line naming it, and the usage text); 4 when no
// NVIDIA GPU is usable (one line with the CUDA runtime's reason); 1 on any other error (the
// data, a file, the GPU run).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>


#include "kernels/core/error.h"
#include "lib/core/checkpoint_file.h"
#include "lib/core/device_info.h"
#include "lib/core/gpu_presence.h"
#include "lib/core/jsonl_log.h"
#include "lib/data/series_dataset.h"
#include "lib/models/model_registry.h"
#include "lib/models/supervised_trainer.h"
#include "lib/rl/dqn/dqn_checkpoint.h"
#include "lib/rl/dqn/dqn_trainer.h"
#include "lib/rl/ppo/cartpole_vector_env.h"
#include "lib/rl/ppo/ppo_checkpoint.h"
#include "lib/rl/ppo/ppo_trainer.h"
#include "lib/rl/ppo/trading_vector_env.h"

namespace {

constexpr const char* kUsage = R"(usage: resident-train TASK [options]
       resident-train MODEL (--synthetic | --csv FILE --target-columns A,B) [options]

TASK
  dqn-cartpole    double DQN with GPU prioritized replay on CartPole-v1 (16 envs)
  ppo-cartpole    PPO on CartPole-v1 (4 envs x 128 steps, CleanRL's setting)
  dqn-trading     double DQN with GPU prioritized replay on the trading env (32 envs, window 9)
                  over the seeded synthetic market (long/flat/short, a transaction cost)
  ppo-trading     PPO on the trading env (128 envs x 128 steps, window 4) over the same market

options (defaults are the task's tested learning config; "C" cartpole, "T" trading)
  --seed N           random seed (default 1; dqn-trading 5, ppo-trading 3)
  --env-steps N      env-step budget (default: dqn-cartpole 500000, ppo-cartpole 1000000,
                     dqn-trading 256000, ppo-trading 4915200)
  --target R         stop when the mean of the last 100 episode returns reaches R (default: C
                     475; T none: the run spends its budget and exits 0)
  --lr X             learning rate (default 2.5e-4; ppo-trading 3e-4)
  --envs N           vector environments (default: dqn-cartpole 16, ppo-cartpole 4,
                     dqn-trading 32, ppo-trading 128)
  --hidden A,B,...   hidden layer widths (default: dqn-cartpole 256,256, ppo-cartpole 64,64,
                     dqn-trading 128,128, ppo-trading 64,64)
  --log FILE         write the learning curve as JSON lines: a header (task, config, commit,
                     GPU), one record per progress line (env steps, episodes, last-100 mean
                     return, losses, wall seconds) and an end record, each flushed as written;
                     appended with --resume
  --checkpoint DIR   save DIR/trainer.ckpt (atomically: a temporary file, then a rename) every
                     --checkpoint-every epochs (DQN) or updates (PPO) and at the end; a DQN
                     checkpoint holds the replay
  --checkpoint-every N  epochs (DQN) or updates (PPO) between checkpoints, >= 1 (default:
                     dqn-cartpole 10, dqn-trading 4, ppo-cartpole 50, ppo-trading 25)
  --resume           continue from DIR/trainer.ckpt bit-identically (needs --checkpoint and the
                     options of the run that wrote it); --env-steps counts from that run's start
  PPO only:
  --anneal-steps N   env steps over which the learning rate anneals linearly to 0 (default:
                     --env-steps); part of the checkpoint's config, so a run to be resumed to a
                     larger --env-steps gives that budget here from its start
  DQN only (default C / T):
  --batch N          replay batch (128 / 128)
  --grad-steps N     gradient steps per vector env step (4 / 2)
  --tau X            Polyak coefficient of the target network, 1 = hard copy (0.005 / 0.01)
  --target-period N  gradient steps between target updates (1 / 1)
  --epsilon-steps N  env steps over which epsilon decays from 1 to its end, 0.01 / 0.05
                     (30000 / 50000)
  --replay N         replay capacity in transitions (500000 / 200000)
  --alpha X          priority exponent, >= 0; 0 = uniform replay (0.6)
  --beta-start X     importance-sampling exponent at the first draw, [0, 1] (0.4)
  --beta-max X       importance-sampling exponent after annealing, [beta-start, 1] (1)
  --beta-steps N     replay draws over which beta anneals linearly to --beta-max; 0 = --beta-max
                     from the start (100000)
  --priority-epsilon X  added to |TD error| before the exponent, > 0 (1e-6)
  trading only (the synthetic market; default dqn-trading / ppo-trading):
  --market-seed N       seed of the synthetic market series (7)
  --market-steps N      steps of the series (50000)
  --signal-strength X   how often the signal feature has the next return's sign,
                        (1 + X) / 2, in [0, 1] (0.3)
  --window N            feature rows per observation (9 / 4)
  --episode-length N    steps per episode (100)
  --cost X              transaction cost per unit of position change, >= 0 (0.0002)
  -h, --help         this text
)";

constexpr const char* kModelUsage = R"(
MODEL options (a supervised time-series model from the registry, at its small config)
  --synthetic              the seeded synthetic series (AR(2) + season + regimes, 6 columns)
  --steps N                synthetic rows (default 20000)
  --csv FILE               a CSV file (header line, comma-separated, a positive price column)
  --target-columns A,B     CSV columns to predict (required with --csv)
  --feature-columns C,D    CSV input columns (default: every column but the date)
  --price-column NAME      the loader's price column (default close)
  --date-column NAME       a text column never parsed (default date)
  --epochs N               at most N epochs (default 20)
  --patience N             stop after N epochs without a better validation loss (default 5)
  --batch N                windows per step (default 64)
  --window N               rows per window (default 64)
  --horizon N              future rows predicted (default 1); a classifier (tlob): the rows
                           of its trend labels, <= --window
  --trend-threshold X      a classifier's trend-label theta, in the target column's normalized
                           units (default: balanced classes on the training split)
  --validation-fraction X  share of the rows for validation, after the training rows (default 0.2)
  --seed N                 model init and shuffle seed (default 1)
  --lr X                   AdamW learning rate (default 1e-3)
  --checkpoint DIR         save DIR/trainer.ckpt after every epoch
  --resume                 continue from DIR/trainer.ckpt (needs --checkpoint)
  --log FILE               JSON lines as for a TASK, one record per epoch (train and
                           validation loss, windows/s, wall seconds); appended with --resume
  --host-fed               the host-fed pipeline (batches assembled on the host, per-step loss
                           readback) instead of the resident one
)";

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "(none registered)" : out;
}

std::string usage_text() {
  return std::string(kUsage) + kModelUsage + "\nMODEL is one of: " +
         joined(resident::models::supervised_model_names()) + "\n";
}

// Bad usage: main prints "resident-train: <message>" and the usage text, exit 2.
struct Usage {
  std::string message;
};

// No usable GPU: main prints one line with `reason` (lib/core/gpu_presence.h), exit 4.
struct NoGpu {
  std::string reason;
};

constexpr int kExitNoGpu = 4;

using Options = std::map<std::string, std::string>;

// The options a task or model takes: `valued` ones are followed by their value, `switches`
// stand alone. Anything else is named as unknown before its value is looked at; an option given
// twice is refused rather than the later one silently winning.
struct OptionSpec {
  std::set<std::string> valued;
  std::set<std::string> switches;
};

Options parse_options(const std::vector<std::string>& args, const OptionSpec& spec,
                      const std::string& who) {
  Options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) throw Usage{"expected an option, got '" + a + "'"};
    const bool valued = spec.valued.count(a) != 0;
    if (!valued && spec.switches.count(a) == 0) throw Usage{"unknown option " + a + " for " + who};
    if (o.count(a) != 0) throw Usage{a + " given twice"};
    if (!valued) {
      o[a] = "";
      continue;
    }
    if (i + 1 >= args.size()) throw Usage{a + " needs a value"};
    o[a] = args[++i];
  }
  return o;
}

// A config's validate() reports "<field> = <value>, allowed <range>" inside a resident::Error;
// for a value given on the command line that is bad usage, so it is rethrown as Usage carrying
// only that text (no source location: the user's fix is the value, not the code).
template <class Config>
void validate_as_usage(const Config& config, const std::string& who) {
  try {
    validate(config);
  } catch (const resident::Error& e) {
    const std::string what = e.what();
    const std::string head = e.call() + " failed with " + e.error_name() + " (";
    const std::string tail = ") at " + e.file() + ":" + std::to_string(e.line());
    const bool framed = what.size() >= head.size() + tail.size() && what.rfind(head, 0) == 0 &&
                        what.compare(what.size() - tail.size(), tail.size(), tail) == 0;
    throw Usage{"invalid " + who + " config: " +
                (framed ? what.substr(head.size(), what.size() - head.size() - tail.size())
                        : e.error_name())};
  }
}

// Throws NoGpu unless a CUDA device is usable (lib/core/gpu_presence.h). Called after the
// options and the data are checked and before anything is built on the GPU, so a machine
// without one gets a plain line instead of the first failed CUDA call of some constructor.
void require_gpu() {
  if (const std::string& reason = resident::gpu_absence_reason(); !reason.empty())
    throw NoGpu{reason};
}

// The commit of the source tree: $RESIDENT_GIT_COMMIT when set (a copy of the tree without .git),
// else asked of git ("-dirty" when tracked files differ), else "unknown".
std::string git_commit() {
  if (const char* commit = std::getenv("RESIDENT_GIT_COMMIT"); commit != nullptr && commit[0])
    return commit;
  const std::string git = std::string("git -C '") + RESIDENT_SOURCE_DIR + "' ";
  std::string out;
  if (FILE* pipe = ::popen((git + "rev-parse --short=12 HEAD 2>/dev/null").c_str(), "r")) {
    char buffer[64] = {};
    if (std::fgets(buffer, sizeof buffer, pipe) != nullptr) out = buffer;
    ::pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (out.empty()) return "unknown";
  if (FILE* pipe =
          ::popen((git + "status --porcelain --untracked-files=no 2>/dev/null").c_str(), "r")) {
    if (std::fgetc(pipe) != EOF) out += "-dirty";
    ::pclose(pipe);
  }
  return out;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string widths_text(const std::vector<std::size_t>& widths) {
  std::string out;
  for (const std::size_t w : widths) out += (out.empty() ? "" : ",") + std::to_string(w);
  return out;
}

// The --log file of a run, or nothing without --log. Opened before the GPU check (a bad path is
// reported first); the header is written once the run is about to start.
class RunLog {
 public:
  RunLog(const Options& o, bool append) {
    if (const auto it = o.find("--log"); it != o.end())
      log_ = std::make_unique<resident::JsonlLog>(it->second,
                                                  append ? resident::JsonlLog::Mode::Append
                                                         : resident::JsonlLog::Mode::Truncate);
  }
  // {"record": "header", "format": 1, "kind", "task", "seed", "commit", "started_utc", "gpu",
  //  "command", "config": {...}}
  void header(const std::string& kind, const std::string& task, std::uint64_t seed,
              const std::string& command, const resident::JsonRecord& config) {
    if (!log_) return;
    std::string reason;
    const std::optional<resident::DeviceInfo> device = resident::probe_device(&reason);
    resident::JsonRecord r;
    r.add("record", "header").add("format", 1).add("kind", kind).add("task", task)
        .add("seed", seed).add("commit", git_commit()).add("started_utc", utc_now())
        .add("gpu", device ? device->name : "unknown")
        .add("command", command).add("config", config);
    log_->write(r);
  }
  void write(const resident::JsonRecord& record) {
    if (log_) log_->write(record);
  }

 private:
  std::unique_ptr<resident::JsonlLog> log_;
};

double number(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v))
    throw Usage{flag + " = '" + text + "': not a finite number"};
  return v;
}

std::size_t count(const std::string& flag, const std::string& text) {
  const double v = number(flag, text);
  if (v < 0 || v != std::floor(v) || v > 1e15)
    throw Usage{flag + " = " + text + ": expected a whole number in [0, 1e15]"};
  return static_cast<std::size_t>(v);
}

std::vector<std::size_t> widths(const std::string& flag, const std::string& text) {
  std::vector<std::size_t> out;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) out.push_back(count(flag, part));
  if (out.empty()) throw Usage{flag + " = '" + text + "': expected widths like 256,256"};
  return out;
}

// A mean episode return as progress lines print it: CartPole's returns are step counts (up to
// 500), a trading episode's return is a sum of log returns less costs (about 1e-3).
std::string return_text(double mean_return, bool trading) {
  char text[32];
  std::snprintf(text, sizeof text, trading ? "%+.5f" : "%6.1f", mean_return);
  return text;
}

// The mean return of the last `window` episodes, fed with (mean, count) batches.
class RecentReturns {
 public:
  explicit RecentReturns(std::size_t window) : window_(window) {}
  void add(double mean, std::uint32_t episodes) {
    for (std::uint32_t i = 0; i < episodes; ++i) returns_.push_back(mean);
    while (returns_.size() > window_) returns_.pop_front();
  }
  bool full() const { return returns_.size() >= window_; }
  // The returns in the window, oldest first, and their restore (a resumed run's window).
  std::vector<double> values() const { return {returns_.begin(), returns_.end()}; }
  void restore(const std::vector<double>& returns) {
    returns_.assign(returns.begin(), returns.end());
    while (returns_.size() > window_) returns_.pop_front();
  }
  double mean() const {
    double sum = 0.0;
    for (const double r : returns_) sum += r;
    return returns_.empty() ? 0.0 : sum / static_cast<double>(returns_.size());
  }

 private:
  std::size_t window_;
  std::deque<double> returns_;
};

const std::set<std::string> kRlValued{"--seed",   "--env-steps",  "--target",
                                      "--lr",     "--envs",       "--hidden",
                                      "--log",    "--checkpoint", "--checkpoint-every"};
const std::set<std::string> kDqnValued{"--batch",        "--grad-steps", "--tau",
                                       "--target-period", "--epsilon-steps", "--replay",
                                       "--alpha",        "--beta-start", "--beta-max",
                                       "--beta-steps",   "--priority-epsilon"};
const std::set<std::string> kMarketValued{"--market-seed", "--market-steps", "--signal-strength",
                                          "--window",      "--episode-length", "--cost"};

// The options of an RL task: the common ones, DQN's or PPO's, and the trading market's.
OptionSpec rl_options(bool dqn, bool trading) {
  OptionSpec spec{kRlValued, {"--resume"}};
  if (dqn) spec.valued.insert(kDqnValued.begin(), kDqnValued.end());
  else spec.valued.insert("--anneal-steps");
  if (trading) spec.valued.insert(kMarketValued.begin(), kMarketValued.end());
  return spec;
}

// --target R when given, else `fallback` (none: the run spends its budget and exits 0).
std::optional<double> target_of(const Options& o, std::optional<double> fallback) {
  const auto it = o.find("--target");
  return it == o.end() ? fallback : std::optional<double>(number("--target", it->second));
}

// The synthetic market of the trading learning tests (tests/rl/dqn/dqn_learning_test.cu,
// tests/rl/ppo/ppo_trading_learning_test.cu): seed 7, 50,000 steps, signal strength 0.3, no
// mean reversion and no trend drift (the signal is the only learnable structure).
resident::SyntheticMarketConfig tested_market(std::size_t noise_features) {
  resident::SyntheticMarketConfig m;
  m.seed = 7;
  m.steps = 50000;
  m.signal_strength = 0.3;
  m.noise_feature_count = noise_features;
  m.mean_reversion = 0.0;
  m.trend_drift = 0.0;
  return m;
}

// The trading env's options from the command line; validated with the trainer's config.
struct TradingOptions {
  resident::SyntheticMarketConfig market;
  std::size_t window = 0;
  std::size_t episode_length = 100;
  float cost = 0.0002f;
};

void apply_market_options(const Options& o, TradingOptions& t) {
  for (const auto& [flag, value] : o) {
    if (flag == "--market-seed") t.market.seed = count(flag, value);
    else if (flag == "--market-steps") t.market.steps = count(flag, value);
    else if (flag == "--signal-strength") t.market.signal_strength = number(flag, value);
    else if (flag == "--window") t.window = count(flag, value);
    else if (flag == "--episode-length") t.episode_length = count(flag, value);
    else if (flag == "--cost") t.cost = static_cast<float>(number(flag, value));
  }
}

void add_market(resident::JsonRecord& config, const TradingOptions& t) {
  config.add("market", "synthetic").add("market_seed", t.market.seed)
      .add("market_steps", t.market.steps).add("signal_strength", t.market.signal_strength)
      .add("noise_features", t.market.noise_feature_count).add("window", t.window)
      .add("episode_length", t.episode_length).add("cost_per_unit", t.cost);
}

// {"record": "progress", "task", "seed", "env_steps", "episodes", "mean_return_100", "wall_s",
//  and the task's losses}; mean_return_100 is over the episodes done so far while fewer than 100.
resident::JsonRecord progress_record(const std::string& task, std::uint64_t seed,
                                     std::uint64_t env_steps, std::uint64_t episodes,
                                     double mean_return, double seconds) {
  resident::JsonRecord r;
  r.add("record", "progress").add("task", task).add("seed", seed).add("env_steps", env_steps)
      .add("episodes", episodes).add("mean_return_100", mean_return).add("wall_s", seconds);
  return r;
}

// {"record": "end", "task", "seed", "reached", "target", "env_steps", "wall_s"}; without a
// target "reached" and "target" are left out.
resident::JsonRecord end_record(const std::string& task, std::uint64_t seed,
                                std::optional<double> target, bool reached,
                                std::uint64_t env_steps, double seconds) {
  resident::JsonRecord r;
  r.add("record", "end").add("task", task).add("seed", seed);
  if (target) r.add("reached", reached).add("target", *target);
  r.add("env_steps", env_steps).add("wall_s", seconds);
  return r;
}

// The last line of an RL run and its exit status: 0 when the target was reached or there was
// none, 3 when it was not reached.
int finish_rl(const char* algo, std::uint64_t seed, std::optional<double> target, bool reached,
              std::uint64_t env_steps) {
  if (target)
    std::printf("%s seed %llu: %s %g at %llu env steps\n", algo,
                static_cast<unsigned long long>(seed), reached ? "reached" : "did NOT reach",
                *target, static_cast<unsigned long long>(env_steps));
  else
    std::printf("%s seed %llu: done, %llu env steps\n", algo,
                static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(env_steps));
  return !target || reached ? 0 : 3;
}

// ---------------------------------------------------------------------------------------------
// RL checkpoints: the trainers' own files (DqnTrainer::save_checkpoint, PpoTrainer::save), read
// and checked on the host before the GPU is touched when a run resumes.

// --checkpoint DIR, --checkpoint-every N and --resume of an RL task.
struct RlCheckpoint {
  std::filesystem::path dir;   // empty: no checkpoints
  std::filesystem::path file;  // dir / "trainer.ckpt"
  std::uint64_t every = 0;     // epochs (DQN) or updates (PPO) between two saves
  bool resume = false;
  bool enabled() const noexcept { return !dir.empty(); }
  // Whether to save after `done` epochs or updates: every `every`, and at the run's end.
  bool due(std::uint64_t done, bool end) const noexcept {
    return enabled() && (end || done % every == 0);
  }
};

// A whole number >= 1 (a count of epochs or updates).
std::uint64_t positive_count(const std::string& flag, const std::string& text) {
  const double v = number(flag, text);
  if (v < 1 || v != std::floor(v) || v > 1e15)
    throw Usage{flag + " = " + text + ": expected a whole number in [1, 1e15]"};
  return static_cast<std::uint64_t>(v);
}

// Bad usage: --checkpoint-every out of range, --checkpoint-every or --resume without --checkpoint.
RlCheckpoint checkpoint_options(const Options& o, std::uint64_t default_every) {
  RlCheckpoint k;
  k.every = default_every;
  if (const auto it = o.find("--checkpoint"); it != o.end()) {
    if (it->second.empty()) throw Usage{"--checkpoint = '': expected a folder"};
    k.dir = it->second;
    k.file = k.dir / "trainer.ckpt";
  }
  if (const auto it = o.find("--checkpoint-every"); it != o.end()) {
    k.every = positive_count(it->first, it->second);
    if (!k.enabled()) throw Usage{"--checkpoint-every needs --checkpoint DIR"};
  }
  k.resume = o.count("--resume") != 0;
  if (k.resume && !k.enabled()) throw Usage{"--resume needs --checkpoint DIR"};
  return k;
}

// Where a resumed run continues: what the checkpoint holds.
struct ResumePoint {
  std::uint64_t done = 0;       // epochs (DQN) or updates (PPO)
  std::uint64_t env_steps = 0;
};

void require_checkpoint(const RlCheckpoint& k) {
  if (!std::filesystem::exists(k.file))
    throw resident::Error("resident-train", "no checkpoint",
                          "--resume: " + k.file.string() + " does not exist", __FILE__, __LINE__);
}

// read(), with a checkpoint of another kind or config ("checkpoint kind mismatch", "checkpoint
// mismatch") rethrown saying what the user can change: the options of the run that wrote it.
// Every other error (a missing, unreadable, corrupt or foreign file) passes as it is.
template <class Read>
auto read_for_resume(const std::filesystem::path& file, const std::string& hint, Read read)
    -> decltype(read()) {
  try {
    return read();
  } catch (const resident::Error& e) {
    if (e.error_name() != "checkpoint mismatch" && e.error_name() != "checkpoint kind mismatch")
      throw;
    throw resident::Error("resident-train", e.error_name(),
                          "--resume: " + file.string() +
                              " was written by another task or config; resume with the options "
                              "of the run that wrote it" + hint + ": " + e.what(),
                          __FILE__, __LINE__);
  }
}

// The DQN checkpoint's kind, config hash and progress, on the host. The "trainer" section opens
// with the vector steps, the gradient steps and the epochs done (lib/rl/dqn/dqn_checkpoint.h);
// the rest of the file is checked again when the trainer loads it.
ResumePoint dqn_resume_point(const RlCheckpoint& k, const resident::dqn::DqnConfig& c) {
  require_checkpoint(k);
  const resident::CheckpointFile file = read_for_resume(
      k.file, "", [&] { return resident::dqn::read_dqn_checkpoint(k.file, config_hash(c)); });
  resident::SectionReader r = file.reader(resident::dqn::kDqnTrainerSection);
  const auto vector_steps = r.get<std::uint64_t>("vector steps");
  (void)r.get<std::uint64_t>("gradient steps");
  ResumePoint p;
  p.done = r.get<std::uint64_t>("epoch");
  p.env_steps = vector_steps * c.env_count;
  return p;
}

// resident-train's own section of a PPO checkpoint: what the progress lines count on the host
// (the trainer keeps neither) and what the run trained on.
//   u64 format (1); string task; string environment ("cartpole" or the market's JSON);
//   u64 episodes; array<double> the last-100 window's returns, oldest first
constexpr const char* kHostSection = "resident-train";
constexpr std::uint64_t kHostSectionFormat = 1;

struct PpoHostState {
  std::string task, environment;
  std::uint64_t episodes = 0;
  std::vector<double> recent;
};

std::vector<std::byte> host_section(const PpoHostState& h) {
  return resident::SectionWriter()
      .put<std::uint64_t>(kHostSectionFormat)
      .put_string(h.task)
      .put_string(h.environment)
      .put<std::uint64_t>(h.episodes)
      .put_array<double>(h.recent)
      .take();
}

PpoHostState read_host_section(const resident::CheckpointFile& file) {
  if (!file.has(kHostSection))
    throw resident::Error("resident-train", "missing section",
                          "--resume: " + file.path().string() + " has no \"" + kHostSection +
                              "\" section (the progress lines' episode returns): resident-train "
                              "resumes the PPO checkpoints it wrote",
                          __FILE__, __LINE__);
  resident::SectionReader r = file.reader(kHostSection);
  const auto format = r.get<std::uint64_t>("format");
  if (format != kHostSectionFormat)
    r.corrupt("format " + std::to_string(format) + ", expected " +
              std::to_string(kHostSectionFormat));
  PpoHostState h;
  h.task = r.get_string("task");
  h.environment = r.get_string("environment");
  h.episodes = r.get<std::uint64_t>("episodes");
  h.recent = r.get_array<double>("recent returns");
  r.finish();
  if (h.recent.size() > 100)
    r.corrupt("recent returns: " + std::to_string(h.recent.size()) + " values, at most 100");
  return h;
}

// The PPO checkpoint's kind, what it trained on (`expected`'s task and environment), its config
// hash and progress, on the host; `host` receives its host section.
ResumePoint ppo_resume_point(const RlCheckpoint& k, const resident::ppo::PpoConfig& c,
                             const PpoHostState& expected, PpoHostState& host) {
  using namespace resident::ppo;
  require_checkpoint(k);
  const std::string hint = " (PPO: --anneal-steps, default --env-steps, is part of the config)";
  host = read_host_section(read_for_resume(k.file, hint, [&] {
    return resident::CheckpointFile::read(k.file, kPpoCheckpointKind);
  }));
  if (host.task != expected.task || host.environment != expected.environment)
    throw resident::Error("resident-train", "checkpoint mismatch",
                          "--resume: " + k.file.string() + " was written by " + host.task +
                              " on " + host.environment + ", this run is " + expected.task +
                              " on " + expected.environment,
                          __FILE__, __LINE__);
  const resident::CheckpointFile file = read_for_resume(
      k.file, hint, [&] { return read_ppo_checkpoint(k.file, config_hash(c)); });
  resident::SectionReader r = file.reader(kPpoTrainerSection);  // opens with the updates done
  ResumePoint p;
  p.done = r.get<std::uint64_t>("updates done");
  p.env_steps = p.done * rollout_samples(c);
  return p;
}

// PpoTrainer::save's file with the host section added, written atomically to k.file: the trainer
// saves to DIR/trainer.ckpt.staged, whose sections are copied into the final file, then the
// staged file is removed. A run killed at any point leaves DIR/trainer.ckpt whole (the previous
// checkpoint or this one).
void save_ppo(resident::ppo::PpoTrainer& trainer, const RlCheckpoint& k, const PpoHostState& h) {
  const std::filesystem::path staged = k.file.string() + ".staged";
  trainer.save(staged);
  const resident::CheckpointFile saved =
      resident::CheckpointFile::read(staged, resident::ppo::kPpoCheckpointKind);
  resident::CheckpointWriter out(resident::ppo::kPpoCheckpointKind);
  for (const std::string& name : saved.section_names()) {
    const std::span<const std::byte> bytes = saved.section(name);
    out.add(name, std::vector<std::byte>(bytes.begin(), bytes.end()));
  }
  out.add(kHostSection, host_section(h));
  out.write(k.file);
  std::filesystem::remove(staged);
}

// --env-steps of a resumed run counts from the original run's start: a budget the checkpoint has
// already spent is bad usage.
[[noreturn]] void budget_spent(std::size_t budget, const RlCheckpoint& k, const ResumePoint& p,
                               const char* unit) {
  throw Usage{"--env-steps = " + std::to_string(budget) + ": " + k.file.string() + " has " +
              std::to_string(p.done) + " " + unit + " (" + std::to_string(p.env_steps) +
              " env steps) done; give a larger budget to continue"};
}

// The DQN trading config the learning test holds to (dqn::trading_learning_config), on the
// tested market.
resident::dqn::DqnConfig dqn_trading_config() {
  return resident::dqn::trading_learning_config(tested_market(5));
}

int train_dqn(const std::string& task, const Options& o, const std::string& command) {
  using namespace resident::dqn;
  const bool trading = task == "dqn-trading";
  const std::optional<double> target = target_of(o, trading ? std::nullopt
                                                            : std::optional<double>(475.0));
  DqnConfig c = trading ? dqn_trading_config() : cartpole_learning_config();
  if (!trading) c.seed = 1;
  std::size_t budget = trading ? 256000 : 500000;  // trading: the test's 16 epochs of 16,000
  TradingOptions t{c.trading.market, c.trading.window, c.trading.episode_length,
                   c.trading.cost_per_unit};
  for (const auto& [flag, value] : o) {
    if (flag == "--seed") c.seed = count(flag, value);
    else if (flag == "--env-steps") budget = count(flag, value);
    else if (flag == "--lr") c.adamw.lr = static_cast<float>(number(flag, value));
    else if (flag == "--envs") c.env_count = count(flag, value);
    else if (flag == "--hidden") c.hidden = widths(flag, value);
    else if (flag == "--batch") c.batch = count(flag, value);
    else if (flag == "--grad-steps") c.gradient_steps_per_env_step = count(flag, value);
    else if (flag == "--tau") c.tau = number(flag, value);
    else if (flag == "--target-period") c.target_update_period = count(flag, value);
    else if (flag == "--epsilon-steps") c.epsilon.decay_env_steps = count(flag, value);
    else if (flag == "--replay") c.replay_capacity = count(flag, value);
    else if (flag == "--alpha") c.priority_alpha = number(flag, value);
    else if (flag == "--beta-start") c.beta_start = number(flag, value);
    else if (flag == "--beta-max") c.beta_max = number(flag, value);
    else if (flag == "--beta-steps") c.beta_annealing_steps = count(flag, value);
    else if (flag == "--priority-epsilon") c.priority_epsilon = number(flag, value);
  }
  if (trading) {
    apply_market_options(o, t);
    c.trading.market = t.market;
    c.trading.window = t.window;
    c.trading.episode_length = t.episode_length;
    c.trading.cost_per_unit = t.cost;
  }
  // Trading: a checkpoint every 4 epochs of 16,000 env steps (its replay is the larger one).
  const RlCheckpoint k = checkpoint_options(o, trading ? 4 : 10);
  validate_as_usage(c, task);
  ResumePoint from;
  if (k.resume) {
    from = dqn_resume_point(k, c);
    if (from.env_steps >= budget) budget_spent(budget, k, from, "epochs");
  }
  RunLog log(o, k.resume);
  require_gpu();
  if (k.enabled()) std::filesystem::create_directories(k.dir);
  resident::JsonRecord config;
  config.add("env_steps_budget", budget);
  if (target) config.add("target", *target);
  config.add("env_count", c.env_count)
      .add("hidden", widths_text(c.hidden)).add("lr", c.adamw.lr).add("batch", c.batch)
      .add("gradient_steps_per_env_step", c.gradient_steps_per_env_step).add("tau", c.tau)
      .add("target_update_period", c.target_update_period)
      .add("epsilon_decay_env_steps", c.epsilon.decay_env_steps)
      .add("replay_capacity", c.replay_capacity).add("priority_alpha", c.priority_alpha)
      .add("beta_start", c.beta_start).add("beta_max", c.beta_max)
      .add("beta_annealing_steps", c.beta_annealing_steps)
      .add("priority_epsilon", c.priority_epsilon).add("gamma", c.gamma)
      .add("reward_scale", c.reward_scale).add("learning_starts", c.learning_starts)
      .add("steps_per_epoch", c.steps_per_epoch);
  if (trading) add_market(config, t);
  if (k.enabled()) config.add("checkpoint", k.dir.string()).add("checkpoint_every", k.every);
  config.add("resumed_after_epoch", from.done).add("resumed_at_env_steps", from.env_steps);
  DqnTrainer trainer(c);
  if (k.resume) {
    trainer.load_checkpoint(k.file);
    std::printf("%s: resumed from %s after epoch %llu (%llu env steps)\n", task.c_str(),
                k.file.c_str(), static_cast<unsigned long long>(from.done),
                static_cast<unsigned long long>(from.env_steps));
    std::fflush(stdout);
  }
  log.header("rl", task, c.seed, command, config);  // once the run is set up (and resumed)
  // Trading epochs are 16,000 env steps (16 in the default budget): a line each.
  const std::uint64_t print_every = trading ? 1 : 10;
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    const DqnEpochMetrics m = trainer.train_epoch();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool reached = target && m.episodes >= 100 && m.mean_recent_return >= *target;
    const bool spent = m.env_steps >= budget;
    if (m.epoch % print_every == 0 || reached || spent) {
      std::printf("dqn seed %llu: %8llu env steps, %7llu gradient steps, %5u episodes, last-100 "
                  "mean %s, loss %.4g, %.1f s\n",
                  static_cast<unsigned long long>(c.seed),
                  static_cast<unsigned long long>(m.env_steps),
                  static_cast<unsigned long long>(m.gradient_steps), m.episodes,
                  return_text(m.mean_recent_return, trading).c_str(), m.mean_loss, seconds);
      std::fflush(stdout);
      log.write(progress_record(task, c.seed, m.env_steps, m.episodes, m.mean_recent_return,
                                seconds)
                    .add("gradient_steps", m.gradient_steps)
                    .add("loss", m.mean_loss));
    }
    if (k.due(m.epoch, reached || spent)) trainer.save_checkpoint(k.file);
    if (reached || spent) {
      log.write(end_record(task, c.seed, target, reached, m.env_steps, seconds));
      return finish_rl("dqn", c.seed, target, reached, m.env_steps);
    }
  }
}

// The PPO trading config of tests/rl/ppo/ppo_trading_learning_test.cu (its out-of-sample test
// passes on an H200): 128 envs x 128 steps, window 4 x 5 features + position, 64-64 tanh
// networks, 4 epochs of 4 minibatches, lr 3e-4 annealed, gamma 0.5, GAE 0.95, entropy 0.01,
// seed 3 (the env's start draws use the trainer's seed, so the env is built once).
void ppo_trading_config(resident::ppo::PpoConfig& p, resident::ppo::TradingVectorEnvConfig& e) {
  e.market = tested_market(3);
  e.env_count = 128;
  e.window = 4;
  e.episode_length = 100;
  e.cost_per_unit = 0.0002f;
  e.seed = 3;
  p.env_count = e.env_count;
  p.rollout_steps = 128;
  p.epochs = 4;
  p.minibatches = 4;
  p.hidden = {64, 64};
  p.learning_rate = 3e-4;
  p.gamma = 0.5;  // a position earns at once; only the next step's cost links the steps
  p.gae_lambda = 0.95;
  p.entropy_coef = 0.01;
  p.seed = e.seed;
}

int train_ppo(const std::string& task, const Options& o, const std::string& command) {
  using namespace resident::ppo;
  const bool trading = task == "ppo-trading";
  const std::optional<double> target = target_of(o, trading ? std::nullopt
                                                            : std::optional<double>(475.0));
  PpoConfig c;  // CleanRL's CartPole setting (tests/rl/ppo/ppo_trainer_test.cu)
  TradingVectorEnvConfig e;
  if (trading) ppo_trading_config(c, e);
  std::size_t budget = trading ? 4915200 : 1000000;  // trading: the test's 300 updates
  std::optional<std::size_t> anneal;                  // --anneal-steps; default: the budget
  for (const auto& [flag, value] : o) {
    if (flag == "--seed") c.seed = count(flag, value);
    else if (flag == "--env-steps") budget = count(flag, value);
    else if (flag == "--anneal-steps") anneal = count(flag, value);
    else if (flag == "--lr") c.learning_rate = number(flag, value);
    else if (flag == "--envs") c.env_count = count(flag, value);
    else if (flag == "--hidden") c.hidden = widths(flag, value);
  }
  // Trading: a checkpoint every 25 updates of 16,384 env steps (a progress line's cadence).
  const RlCheckpoint k = checkpoint_options(o, trading ? 25 : 50);
  // Whole updates, at least one: the run's (the budget) and the lr annealing horizon's.
  const std::size_t per_update = std::max<std::size_t>(c.env_count * c.rollout_steps, 1);
  const std::size_t updates = std::max<std::size_t>(budget / per_update, 1);
  c.total_updates = std::max<std::size_t>(anneal.value_or(budget) / per_update, 1);
  validate_as_usage(c, task);
  TradingOptions t{e.market, e.window, e.episode_length, e.cost_per_unit};
  if (trading) {
    apply_market_options(o, t);
    e.market = t.market;
    e.window = t.window;
    e.episode_length = t.episode_length;
    e.cost_per_unit = t.cost;
    e.env_count = c.env_count;
    e.seed = c.seed;
    validate_as_usage(e, task + " env");
  }
  PpoHostState host{task, "cartpole", 0, {}};
  if (trading) {
    resident::JsonRecord market;
    add_market(market, t);
    host.environment = market.text();
  }
  ResumePoint from;
  PpoHostState resumed;
  if (k.resume) {
    from = ppo_resume_point(k, c, host, resumed);
    if (from.done >= updates) budget_spent(budget, k, from, "updates");
  }
  RunLog log(o, k.resume);
  require_gpu();
  if (k.enabled()) std::filesystem::create_directories(k.dir);
  resident::JsonRecord config;
  config.add("env_steps_budget", budget);
  if (target) config.add("target", *target);
  config.add("env_count", c.env_count)
      .add("hidden", widths_text(c.hidden)).add("lr", c.learning_rate)
      .add("rollout_steps", c.rollout_steps).add("epochs", c.epochs)
      .add("minibatches", c.minibatches).add("updates", updates)
      .add("total_updates", c.total_updates)  // the lr annealing horizon
      .add("gamma", c.gamma).add("gae_lambda", c.gae_lambda).add("clip_coef", c.clip_coef)
      .add("entropy_coef", c.entropy_coef).add("value_coef", c.value_coef);
  if (trading) add_market(config, t);
  if (k.enabled()) config.add("checkpoint", k.dir.string()).add("checkpoint_every", k.every);
  config.add("resumed_after_update", from.done).add("resumed_at_env_steps", from.env_steps);
  std::unique_ptr<resident::VectorEnv> env;
  if (trading) env = std::make_unique<TradingVectorEnv>(e);
  else env = std::make_unique<CartPoleVectorEnv>(c.env_count);
  PpoTrainer trainer(c, *env);
  RecentReturns recent(100);
  std::uint64_t episodes = 0;
  if (k.resume) {
    trainer.load(k.file);
    recent.restore(resumed.recent);
    episodes = resumed.episodes;
    std::printf("%s: resumed from %s after update %llu (%llu env steps)\n", task.c_str(),
                k.file.c_str(), static_cast<unsigned long long>(from.done),
                static_cast<unsigned long long>(from.env_steps));
    std::fflush(stdout);
  }
  log.header("rl", task, c.seed, command, config);  // once the run is set up (and resumed)
  // Trading: 300 updates in the default budget, a line every 25 (the test's cadence).
  const std::size_t print_every = trading ? 25 : 50;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t u = from.done; u < updates; ++u) {
    const PpoUpdateResult r = trainer.train_update();
    if (r.episodes > 0) recent.add(r.mean_episode_return, r.episodes);
    episodes += r.episodes;
    const std::size_t steps = (u + 1) * per_update;
    const bool reached = target && recent.full() && recent.mean() >= *target;
    const bool last = u + 1 == updates;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (u % print_every == 0 || reached || last) {
      std::printf("ppo seed %llu: %8zu env steps, last-100 mean %s, policy loss %+.4f, value "
                  "loss %.4g, %.1f s\n",
                  static_cast<unsigned long long>(c.seed), steps,
                  return_text(recent.mean(), trading).c_str(), r.policy_loss, r.value_loss,
                  seconds);
      std::fflush(stdout);
      log.write(progress_record(task, c.seed, steps, episodes, recent.mean(), seconds)
                    .add("policy_loss", r.policy_loss)
                    .add("value_loss", r.value_loss));
    }
    if (k.due(u + 1, reached || last)) {
      host.episodes = episodes;
      host.recent = recent.values();
      save_ppo(trainer, k, host);
    }
    if (reached || last) {
      log.write(end_record(task, c.seed, target, reached, steps, seconds));
      return finish_rl("ppo", c.seed, target, reached, steps);
    }
  }
  return 3;
}

std::vector<std::string> names(const std::string& flag, const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ','))
    if (!part.empty()) out.push_back(part);
  if (out.empty()) throw Usage{flag + " = '" + text + "': expected column names like a,b"};
  return out;
}

// A supervised model on a synthetic or CSV series: progress per epoch, the best epoch kept.
int train_model(const std::string& model, const std::vector<std::string>& args,
                const std::string& command) {
  using namespace resident;
  using namespace resident::models;
  static const OptionSpec kSpec{
      {"--steps", "--csv", "--target-columns", "--feature-columns", "--price-column",
       "--date-column", "--epochs", "--patience", "--batch", "--window", "--horizon",
       "--validation-fraction", "--seed", "--lr", "--trend-threshold", "--checkpoint", "--log"},
      {"--synthetic", "--resume", "--host-fed"}};
  const Options o = parse_options(args, kSpec, "model " + model);
  SupervisedTrainerConfig c;
  c.seed = 1;
  data::SyntheticSeriesConfig synthetic;
  data::CsvSeriesOptions csv;
  std::filesystem::path checkpoint_dir;
  for (const auto& [flag, value] : o) {
    if (flag == "--steps") synthetic.steps = count(flag, value);
    else if (flag == "--target-columns") csv.target_columns = names(flag, value);
    else if (flag == "--feature-columns") csv.feature_columns = names(flag, value);
    else if (flag == "--price-column") csv.price_column = value;
    else if (flag == "--date-column") csv.date_column = value;
    else if (flag == "--epochs") c.epochs = count(flag, value);
    else if (flag == "--patience") c.patience = count(flag, value);
    else if (flag == "--batch") c.batch = count(flag, value);
    else if (flag == "--window") c.window = count(flag, value);
    else if (flag == "--horizon") c.horizon = count(flag, value);
    else if (flag == "--validation-fraction") c.validation_fraction = number(flag, value);
    else if (flag == "--seed") c.seed = count(flag, value);
    else if (flag == "--lr") c.adamw.lr = number(flag, value);
    else if (flag == "--trend-threshold") c.trend_threshold = number(flag, value);
    else if (flag == "--checkpoint") checkpoint_dir = value;
  }
  const bool use_csv = o.count("--csv") != 0, use_synthetic = o.count("--synthetic") != 0;
  if (use_csv == use_synthetic) throw Usage{"give exactly one of --synthetic and --csv FILE"};
  if (use_csv && csv.target_columns.empty()) throw Usage{"--csv needs --target-columns"};
  if (!use_csv && (o.count("--target-columns") || o.count("--feature-columns") ||
                   o.count("--price-column") || o.count("--date-column")))
    throw Usage{"--target-columns, --feature-columns, --price-column and --date-column need --csv"};
  if (use_csv && o.count("--steps")) throw Usage{"--steps applies to --synthetic only"};
  const bool resume = o.count("--resume") != 0;
  if (resume && checkpoint_dir.empty()) throw Usage{"--resume needs --checkpoint DIR"};
  if (o.count("--host-fed")) c.pipeline = TrainerPipeline::HostFed;
  validate_as_usage(c, "model " + model);

  synthetic.seed = c.seed;
  data::HostSeries series;
  if (use_csv) {
    csv.path = o.at("--csv");
    series = data::load_csv_series(csv);
  } else {
    series = data::make_synthetic_series(synthetic);
  }
  // The split's errors (a window longer than the series, no validation window) before the GPU.
  (void)data::split_series(series.steps, c.window, c.horizon, c.validation_fraction);
  const std::filesystem::path checkpoint = checkpoint_dir / "trainer.ckpt";
  if (resume && !std::filesystem::exists(checkpoint))
    throw resident::Error("resident-train", "no checkpoint",
                          "--resume: " + checkpoint.string() + " does not exist", __FILE__,
                          __LINE__);
  RunLog log(o, resume);
  require_gpu();
  if (!checkpoint_dir.empty()) std::filesystem::create_directories(checkpoint_dir);

  Stream setup_stream;
  const data::SeriesDataset dataset(std::move(series), window_spec(c), setup_stream.get());
  std::printf("%s: %s\n", model.c_str(), dataset.describe().c_str());
  const std::unique_ptr<SupervisedTrainer> trainer = make_supervised_trainer(model, c, dataset);
  std::printf("%s: %s, %s pipeline, %zu steps of %zu per epoch\n", model.c_str(),
              trainer->model().describe().c_str(), pipeline_name(c.pipeline),
              trainer->steps_per_epoch(), c.batch);
  if (o.count("--trend-threshold") && !trainer->classifies())
    throw Usage{"--trend-threshold applies to a classifier (tlob); " + model + " is a regressor"};
  if (trainer->classifies())
    std::printf("%s: trend labels over %zu rows, theta %.6g%s\n", model.c_str(), c.horizon,
                trainer->trend_threshold(), c.trend_threshold < 0.0 ? " (balanced)" : "");
  if (resume) {
    trainer->load_checkpoint(checkpoint);
    std::printf("%s: resumed from %s after epoch %zu\n", model.c_str(), checkpoint.c_str(),
                trainer->epochs_done());
  }
  JsonRecord config;
  config.add("model", trainer->model().describe()).add("pipeline", pipeline_name(c.pipeline))
      .add("data", use_csv ? "csv" : "synthetic");
  if (use_csv) config.add("csv", o.at("--csv")).add("target_columns", o.at("--target-columns"));
  else config.add("synthetic_steps", synthetic.steps);
  config.add("epochs", c.epochs).add("patience", c.patience).add("batch", c.batch)
      .add("window", c.window).add("horizon", c.horizon)
      .add("validation_fraction", c.validation_fraction).add("lr", c.adamw.lr)
      .add("steps_per_epoch", trainer->steps_per_epoch())
      .add("resumed_after_epoch", trainer->epochs_done());
  log.header("supervised", model, c.seed, command, config);
  const auto start = std::chrono::steady_clock::now();
  while (!trainer->stopped() && trainer->epochs_done() < c.epochs) {
    const EpochResult r = trainer->train_epoch();
    JsonRecord record;
    record.add("record", "epoch").add("task", model).add("seed", c.seed).add("epoch", r.epoch)
        .add("train_loss", r.train_loss).add("validation_loss", r.validation_loss)
        .add("best", r.improved).add("windows_per_second", r.windows_per_second)
        .add("epoch_s", r.seconds)
        .add("wall_s",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (trainer->classifies())
      record.add("validation_accuracy", r.validation_accuracy)
          .add("validation_macro_f1", r.validation_macro_f1);
    log.write(record);
    std::printf("%s epoch %zu: train loss %.6f, validation loss %.6f%s, %.0f windows/s, %.2f s\n",
                model.c_str(), r.epoch, r.train_loss, r.validation_loss,
                r.improved ? " (best)" : "", r.windows_per_second, r.seconds);
    if (trainer->classifies())
      std::printf("%s epoch %zu: validation accuracy %.4f, macro F1 %.4f\n", model.c_str(),
                  r.epoch, r.validation_accuracy, r.validation_macro_f1);
    std::fflush(stdout);
    if (!checkpoint_dir.empty()) trainer->save_checkpoint(checkpoint);
  }
  trainer->restore_best();
  std::printf("%s: %s after epoch %zu; best validation loss %.6f at epoch %zu (parameters kept)\n",
              model.c_str(), trainer->stopped() ? "early stop" : "done", trainer->epochs_done(),
              trainer->best_validation_loss(), trainer->best_epoch());
  log.write(JsonRecord()
                .add("record", "end").add("task", model).add("seed", c.seed)
                .add("stopped_early", trainer->stopped()).add("epochs_done", trainer->epochs_done())
                .add("best_epoch", trainer->best_epoch())
                .add("best_validation_loss", trainer->best_validation_loss())
                .add("wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                             start).count()));
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    for (const std::string& a : args)
      if (a == "-h" || a == "--help") {
        std::fputs(usage_text().c_str(), stdout);
        return 0;
      }
    if (args.empty()) throw Usage{"missing TASK"};
    std::string command = "resident-train";
    for (const std::string& a : args) command += " " + a;
    const std::string task = args[0];
    static const std::vector<std::string> kTasks = {"dqn-cartpole", "ppo-cartpole",
                                                    "dqn-trading", "ppo-trading"};
    if (std::find(kTasks.begin(), kTasks.end(), task) == kTasks.end()) {
      const std::vector<std::string> models = resident::models::supervised_model_names();
      if (std::find(models.begin(), models.end(), task) == models.end())
        throw Usage{"unknown TASK '" + task + "'; tasks: " + joined(kTasks) + "; models: " +
                    joined(models)};
      return train_model(task, std::vector<std::string>(args.begin() + 1, args.end()), command);
    }
    const bool dqn = task.rfind("dqn-", 0) == 0;
    const bool trading = task.find("-trading") != std::string::npos;
    const Options options = parse_options(std::vector<std::string>(args.begin() + 1, args.end()),
                                          rl_options(dqn, trading), task);
    return dqn ? train_dqn(task, options, command) : train_ppo(task, options, command);
  } catch (const Usage& u) {
    std::fprintf(stderr, "resident-train: %s\n%s", u.message.c_str(), usage_text().c_str());
    return 2;
  } catch (const NoGpu& g) {
    std::fprintf(stderr, "resident-train: %s\n", g.reason.c_str());
    return kExitNoGpu;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resident-train: %s\n", e.what());
    return 1;
  }
}
