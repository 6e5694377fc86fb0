#include "lib/rl/dqn/dqn_config.h"

#include <cmath>
#include <cstring>
#include <sstream>
#include <string>

#include "kernels/core/error.h"
#include "lib/replay/gpu_replay_buffer.h"

namespace resident::dqn {

namespace {

class Problems {
 public:
  template <class T>
  void check(bool ok, const char* field, const T& value, const char* allowed) {
    if (ok) return;
    std::ostringstream line;
    line.precision(17);
    line << field << " = " << value << ", allowed " << allowed;
    lines_.push_back(line.str());
  }
  void throw_if_any() const {
    if (lines_.empty()) return;
    std::string all;
    for (const std::string& l : lines_) all += (all.empty() ? "" : "; ") + l;
    throw Error("DqnConfig", "invalid config", all, __FILE__, __LINE__);
  }

 private:
  std::vector<std::string> lines_;
};

bool finite(double v) { return std::isfinite(v); }

// FNV-1a over the bytes of each value, in a fixed order.
class Hasher {
 public:
  template <class T>
  Hasher& add(const T& value) {
    unsigned char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));
    for (unsigned char b : bytes) hash_ = (hash_ ^ b) * 0x100000001b3ull;
    return *this;
  }
  std::uint64_t value() const noexcept { return hash_; }

 private:
  std::uint64_t hash_ = 0xcbf29ce484222325ull;
};

}  // namespace

void validate(const DqnConfig& c) {
  Problems p;
  p.check(c.env_count >= 1 && c.env_count <= 65536, "env_count", c.env_count, "[1, 65536]");
  p.check(!c.hidden.empty(), "hidden", "{}", "at least one width");
  for (std::size_t w : c.hidden) p.check(w >= 1 && w <= 65536, "hidden[i]", w, "[1, 65536]");
  p.check(c.gamma >= 0.0 && c.gamma <= 1.0, "gamma", c.gamma, "[0, 1]");
  p.check(std::isfinite(c.reward_scale) && c.reward_scale > 0.0f, "reward_scale", c.reward_scale,
          "finite, > 0");
  p.check(c.batch >= 1 && c.batch <= 65536, "batch", c.batch, "[1, 65536]");
  p.check(c.gradient_steps_per_env_step >= 1 && c.gradient_steps_per_env_step <= 64,
          "gradient_steps_per_env_step", c.gradient_steps_per_env_step, "[1, 64]");
  p.check(c.replay_capacity >= c.batch && c.replay_capacity <= kMaxGpuReplayCapacity,
          "replay_capacity", c.replay_capacity, "[batch, 2^30]");
  p.check(finite(c.priority_alpha) && c.priority_alpha >= 0.0, "priority_alpha", c.priority_alpha,
          "finite, >= 0");
  p.check(c.beta_start >= 0.0 && c.beta_start <= 1.0, "beta_start", c.beta_start, "[0, 1]");
  p.check(c.beta_max >= c.beta_start && c.beta_max <= 1.0, "beta_max", c.beta_max,
          "[beta_start, 1]");
  p.check(finite(c.priority_epsilon) && c.priority_epsilon > 0.0, "priority_epsilon",
          c.priority_epsilon, "finite, > 0");
  p.check(c.learning_starts >= c.batch && c.learning_starts <= c.replay_capacity,
          "learning_starts", c.learning_starts, "[batch, replay_capacity]");
  p.check(c.epsilon.start >= 0.0 && c.epsilon.start <= 1.0, "epsilon.start", c.epsilon.start,
          "[0, 1]");
  p.check(c.epsilon.end >= 0.0 && c.epsilon.end <= 1.0, "epsilon.end", c.epsilon.end, "[0, 1]");
  p.check(finite(c.adamw.lr) && c.adamw.lr > 0.0, "adamw.lr", c.adamw.lr, "finite, > 0");
  p.check(c.adamw.beta1 >= 0.0 && c.adamw.beta1 < 1.0, "adamw.beta1", c.adamw.beta1, "[0, 1)");
  p.check(c.adamw.beta2 >= 0.0 && c.adamw.beta2 < 1.0, "adamw.beta2", c.adamw.beta2, "[0, 1)");
  p.check(finite(c.adamw.eps) && c.adamw.eps > 0.0, "adamw.eps", c.adamw.eps, "finite, > 0");
  p.check(finite(c.adamw.weight_decay) && c.adamw.weight_decay >= 0.0, "adamw.weight_decay",
          c.adamw.weight_decay, "finite, >= 0");
  p.check(c.adamw.schedule == nn::LrSchedule::Constant ||
              c.adamw.schedule == nn::LrSchedule::LinearToZero,
          "adamw.schedule", static_cast<std::uint32_t>(c.adamw.schedule),
          "Constant (0) or LinearToZero (1)");
  p.check(c.adamw.steps_per_group >= 1, "adamw.steps_per_group", c.adamw.steps_per_group, ">= 1");
  p.check(c.adamw.total_groups >= 1, "adamw.total_groups", c.adamw.total_groups, ">= 1");
  p.check(c.max_grad_norm > 0.0, "max_grad_norm", c.max_grad_norm, "> 0 (inf: no clipping)");
  p.check(finite(c.huber_delta) && c.huber_delta > 0.0, "huber_delta", c.huber_delta,
          "finite, > 0");
  p.check(c.tau > 0.0 && c.tau <= 1.0, "tau", c.tau, "(0, 1]");
  p.check(c.target_update_period >= 1, "target_update_period", c.target_update_period, ">= 1");
  p.check(c.steps_per_epoch >= 1, "steps_per_epoch", c.steps_per_epoch, ">= 1");
  static_assert(kMaxStepsPerGraph == 64, "the range below names it");
  p.check(c.steps_per_graph >= 1 && c.steps_per_graph <= kMaxStepsPerGraph, "steps_per_graph",
          c.steps_per_graph, "[1, 64]");
  p.check(c.return_window >= 1 && c.return_window <= (std::size_t{1} << 20), "return_window",
          c.return_window, "[1, 2^20]");
  if (c.env == DqnEnvKind::Trading) {
    const DqnTradingConfig& t = c.trading;
    p.check(t.window >= 1, "trading.window", t.window, ">= 1");
    p.check(t.episode_length >= 1, "trading.episode_length", t.episode_length, ">= 1");
    p.check(t.market.steps >= t.window + t.episode_length, "trading.market.steps", t.market.steps,
            ">= trading.window + trading.episode_length");
    p.check(std::isfinite(t.cost_per_unit) && t.cost_per_unit >= 0.0f, "trading.cost_per_unit",
            t.cost_per_unit, "finite, >= 0");
  }
  p.throw_if_any();
  if (c.env == DqnEnvKind::Trading) validate(c.trading.market);
}

std::uint64_t config_hash(const DqnConfig& c) {
  Hasher h;
  h.add(static_cast<int>(c.env)).add(c.env_count).add(c.hidden.size());
  for (std::size_t w : c.hidden) h.add(w);
  h.add(c.dueling).add(c.gamma).add(c.reward_scale).add(c.batch).add(c.gradient_steps_per_env_step);
  h.add(c.replay_capacity).add(c.priority_alpha).add(c.beta_start).add(c.beta_max);
  h.add(c.beta_annealing_steps).add(c.priority_epsilon).add(c.learning_starts);
  h.add(c.epsilon.start).add(c.epsilon.end).add(c.epsilon.decay_env_steps);
  h.add(c.adamw.lr).add(c.adamw.beta1).add(c.adamw.beta2).add(c.adamw.eps).add(c.adamw.weight_decay);
  if (c.adamw.schedule != nn::LrSchedule::Constant)  // constant-lr configs keep their old hashes
    h.add(static_cast<std::uint32_t>(c.adamw.schedule))
        .add(c.adamw.steps_per_group)
        .add(c.adamw.total_groups);
  h.add(c.max_grad_norm).add(c.huber_delta).add(c.tau).add(c.target_update_period);
  h.add(c.steps_per_epoch).add(c.return_window).add(c.allow_tf32);
  h.add(static_cast<int>(c.pipeline)).add(c.seed).add(c.fused_train_step).add(c.fused_acting);
  if (c.env == DqnEnvKind::Trading) {
    const DqnTradingConfig& t = c.trading;
    const SyntheticMarketConfig& m = t.market;
    h.add(t.window).add(t.episode_length).add(t.cost_per_unit);
    h.add(static_cast<int>(t.normalization.kind)).add(t.normalization.rolling_window);
    h.add(t.normalization.epsilon);
    h.add(m.seed).add(m.steps).add(m.signal_strength).add(m.noise_feature_count);
    h.add(m.regime_persistence).add(m.volatility).add(m.trend_drift).add(m.mean_reversion);
    h.add(m.high_volatility_multiplier).add(m.noise_autocorrelation);
  }
  return h.value();
}

DqnConfig cartpole_learning_config() {
  DqnConfig c;
  c.env = DqnEnvKind::CartPole;
  c.env_count = 16;
  c.hidden = {256, 256};
  c.batch = 128;
  c.gradient_steps_per_env_step = 4;  // 0.25 gradient steps per transition
  c.replay_capacity = 500000;
  c.learning_starts = 2000;
  c.epsilon = {1.0, 0.01, 30000};
  c.adamw.lr = 2.5e-4;
  c.gamma = 0.99;
  c.tau = 0.005;
  c.target_update_period = 1;
  c.max_grad_norm = 10.0;
  c.beta_annealing_steps = 100000;
  c.steps_per_epoch = 250;  // 4000 env steps
  c.return_window = 100;
  return c;
}

DqnConfig trading_learning_config(const SyntheticMarketConfig& market) {
  DqnConfig c;
  c.env = DqnEnvKind::Trading;
  c.trading.market = market;
  c.trading.window = 9;
  c.trading.episode_length = 100;
  c.trading.cost_per_unit = 0.0002f;
  c.env_count = 32;
  c.hidden = {128, 128};
  c.batch = 128;
  c.gradient_steps_per_env_step = 2;
  c.replay_capacity = 200000;
  c.learning_starts = 5000;
  c.epsilon = {1.0, 0.05, 50000};
  c.gamma = 0.5;
  c.reward_scale = 100.0f;
  c.adamw.lr = 2.5e-4;
  c.tau = 0.01;
  c.target_update_period = 1;
  c.steps_per_epoch = 500;
  c.seed = 5;
  return c;
}

}  // namespace resident::dqn
