// resident-train: trains one agent on the GPU and prints its progress, e.g.
//   resident-train dqn-cartpole --seed 3 --lr 2.5e-4
//   resident-train ppo-cartpole --seed 1 --env-steps 1000000
// Stops when the mean return of the last 100 episodes reaches --target (default 475), or when
// --env-steps are spent. Exit status: 0 when the target was reached, 3 when not, 2 on bad usage,
// 1 on an error (the trainer's message, naming the value and its allowed range).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "lib/rl/dqn/dqn_trainer.h"
#include "lib/rl/ppo/cartpole_vector_env.h"
#include "lib/rl/ppo/ppo_trainer.h"

namespace {

constexpr const char* kUsage = R"(usage: resident-train TASK [options]

TASK
  dqn-cartpole    double DQN with GPU prioritized replay on CartPole-v1 (16 envs)
  ppo-cartpole    PPO on CartPole-v1 (4 envs x 128 steps, CleanRL's setting)

options (defaults are the task's tested learning config)
  --seed N           random seed (default 1)
  --env-steps N      env-step budget (default 500000 for DQN, 1000000 for PPO)
  --target R         stop when the mean of the last 100 episode returns reaches R (default 475)
  --lr X             learning rate
  --envs N           vector environments
  --hidden A,B,...   hidden layer widths
  DQN only:
  --batch N          replay batch
  --grad-steps N     gradient steps per vector env step
  --tau X            Polyak coefficient of the target network (1 = hard copy)
  --target-period N  gradient steps between target updates
  --epsilon-steps N  env steps over which epsilon decays from 1 to 0.01
  --replay N         replay capacity (transitions)
  -h, --help         this text
)";

struct Usage {
  std::string message;
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

// The mean return of the last `window` episodes, fed with (mean, count) batches.
class RecentReturns {
 public:
  explicit RecentReturns(std::size_t window) : window_(window) {}
  void add(double mean, std::uint32_t episodes) {
    for (std::uint32_t i = 0; i < episodes; ++i) returns_.push_back(mean);
    while (returns_.size() > window_) returns_.pop_front();
  }
  bool full() const { return returns_.size() >= window_; }
  double mean() const {
    double sum = 0.0;
    for (const double r : returns_) sum += r;
    return returns_.empty() ? 0.0 : sum / static_cast<double>(returns_.size());
  }

 private:
  std::size_t window_;
  std::deque<double> returns_;
};

using Options = std::map<std::string, std::string>;

int train_dqn(const Options& o, double target) {
  using namespace resident::rl;
  DqnConfig c = cartpole_learning_config();  // the config the learning tests hold to
  c.seed = 1;
  std::size_t budget = 500000;
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
    else if (flag != "--target") throw Usage{"unknown option " + flag + " for dqn-cartpole"};
  }
  DqnTrainer trainer(c);
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    const DqnEpochMetrics m = trainer.train_epoch();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool reached = m.episodes >= 100 && m.mean_recent_return >= target;
    const bool spent = m.env_steps >= budget;
    if (m.epoch % 10 == 0 || reached || spent)
      std::printf("dqn seed %llu: %8llu env steps, %7llu gradient steps, %5u episodes, last-100 mean "
                  "%6.1f, loss %.4g, %.1f s\n",
                  static_cast<unsigned long long>(c.seed), static_cast<unsigned long long>(m.env_steps),
                  static_cast<unsigned long long>(m.gradient_steps), m.episodes, m.mean_recent_return,
                  m.mean_loss, seconds);
    if (reached || spent) {
      std::printf("dqn seed %llu: %s %.0f at %llu env steps\n", static_cast<unsigned long long>(c.seed),
                  reached ? "reached" : "did NOT reach", target,
                  static_cast<unsigned long long>(m.env_steps));
      return reached ? 0 : 3;
    }
  }
}

int train_ppo(const Options& o, double target) {
  using namespace resident::ppo;
  PpoConfig c;  // CleanRL's CartPole setting (tests/rl/ppo/ppo_trainer_test.cu)
  std::size_t budget = 1000000;
  for (const auto& [flag, value] : o) {
    if (flag == "--seed") c.seed = count(flag, value);
    else if (flag == "--env-steps") budget = count(flag, value);
    else if (flag == "--lr") c.learning_rate = number(flag, value);
    else if (flag == "--envs") c.env_count = count(flag, value);
    else if (flag == "--hidden") c.hidden = widths(flag, value);
    else if (flag != "--target") throw Usage{"unknown option " + flag + " for ppo-cartpole"};
  }
  const std::size_t per_update = c.env_count * c.rollout_steps;
  c.total_updates = std::max<std::size_t>(budget / std::max<std::size_t>(per_update, 1), 1);
  CartPoleVectorEnv env(c.env_count);
  PpoTrainer trainer(c, env);
  RecentReturns recent(100);
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t u = 0; u < c.total_updates; ++u) {
    const PpoUpdateResult r = trainer.train_update();
    if (r.episodes > 0) recent.add(r.mean_episode_return, r.episodes);
    const std::size_t steps = (u + 1) * per_update;
    const bool reached = recent.full() && recent.mean() >= target;
    const bool last = u + 1 == c.total_updates;
    if (u % 50 == 0 || reached || last)
      std::printf("ppo seed %llu: %8zu env steps, last-100 mean %6.1f, policy loss %+.4f, value loss "
                  "%.4f, %.1f s\n",
                  static_cast<unsigned long long>(c.seed), steps, recent.mean(), r.policy_loss,
                  r.value_loss,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (reached || last) {
      std::printf("ppo seed %llu: %s %.0f at %zu env steps\n", static_cast<unsigned long long>(c.seed),
                  reached ? "reached" : "did NOT reach", target, steps);
      return reached ? 0 : 3;
    }
  }
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    for (const std::string& a : args)
      if (a == "-h" || a == "--help") {
        std::fputs(kUsage, stdout);
        return 0;
      }
    if (args.empty()) throw Usage{"missing TASK"};
    const std::string task = args[0];
    Options options;
    for (std::size_t i = 1; i < args.size(); i += 2) {
      if (args[i].rfind("--", 0) != 0) throw Usage{"expected an option, got '" + args[i] + "'"};
      if (i + 1 >= args.size()) throw Usage{args[i] + " needs a value"};
      options[args[i]] = args[i + 1];
    }
    const double target = options.count("--target") ? number("--target", options["--target"]) : 475.0;
    if (task == "dqn-cartpole") return train_dqn(options, target);
    if (task == "ppo-cartpole") return train_ppo(options, target);
    throw Usage{"unknown TASK '" + task + "'"};
  } catch (const Usage& u) {
    std::fprintf(stderr, "resident-train: %s\n%s", u.message.c_str(), kUsage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resident-train: %s\n", e.what());
    return 1;
  }
}
