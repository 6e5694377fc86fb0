#include "lib/rl/ppo/ppo_config.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>

#include "kernels/core/error.h"

namespace resident::ppo {

namespace {

template <class T>
std::string text(T value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}

template <class T>
void require(bool ok, const char* field, T value, const char* allowed, int line) {
  if (!ok)
    throw Error("PpoConfig", "invalid config",
                std::string(field) + " = " + text(value) + ", allowed " + allowed, __FILE__, line);
}

class Fnv1a {
 public:
  template <class T>
  void add(const T& value) {
    unsigned char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));
    for (unsigned char b : bytes) hash_ = (hash_ ^ b) * 0x100000001b3ull;
  }
  std::uint64_t value() const { return hash_; }

 private:
  std::uint64_t hash_ = 0xcbf29ce484222325ull;
};

}  // namespace

void validate(const PpoConfig& c) {
  require(c.env_count >= 1, "env_count", c.env_count, ">= 1", __LINE__);
  require(c.rollout_steps >= 1, "rollout_steps", c.rollout_steps, ">= 1", __LINE__);
  require(c.env_count <= static_cast<std::size_t>(INT_MAX) / c.rollout_steps,
          "env_count * rollout_steps", c.env_count * c.rollout_steps, "<= 2147483647", __LINE__);
  require(c.epochs >= 1, "epochs", c.epochs, ">= 1", __LINE__);
  require(c.minibatches >= 1 && c.minibatches <= rollout_samples(c), "minibatches", c.minibatches,
          "[1, env_count * rollout_steps]", __LINE__);
  require(rollout_samples(c) % c.minibatches == 0, "minibatches", c.minibatches,
          "a divisor of env_count * rollout_steps", __LINE__);
  require(!c.hidden.empty(), "hidden.size()", c.hidden.size(), ">= 1", __LINE__);
  for (std::size_t width : c.hidden) require(width >= 1, "hidden width", width, ">= 1", __LINE__);
  require(std::isfinite(c.learning_rate) && c.learning_rate > 0.0, "learning_rate",
          c.learning_rate, "finite and > 0", __LINE__);
  require(c.total_updates >= 1, "total_updates", c.total_updates, ">= 1", __LINE__);
  require(c.gamma >= 0.0 && c.gamma <= 1.0, "gamma", c.gamma, "[0, 1]", __LINE__);
  require(c.gae_lambda >= 0.0 && c.gae_lambda <= 1.0, "gae_lambda", c.gae_lambda, "[0, 1]",
          __LINE__);
  require(c.clip_coef > 0.0 && c.clip_coef < 1.0, "clip_coef", c.clip_coef, "(0, 1)", __LINE__);
  require(std::isfinite(c.entropy_coef) && c.entropy_coef >= 0.0, "entropy_coef", c.entropy_coef,
          "finite and >= 0", __LINE__);
  require(std::isfinite(c.value_coef) && c.value_coef >= 0.0, "value_coef", c.value_coef,
          "finite and >= 0", __LINE__);
  require(c.max_grad_norm > 0.0, "max_grad_norm", c.max_grad_norm, "> 0 (+inf: no clipping)",
          __LINE__);
  require(c.adam_beta1 >= 0.0 && c.adam_beta1 < 1.0, "adam_beta1", c.adam_beta1, "[0, 1)",
          __LINE__);
  require(c.adam_beta2 >= 0.0 && c.adam_beta2 < 1.0, "adam_beta2", c.adam_beta2, "[0, 1)",
          __LINE__);
  require(std::isfinite(c.adam_eps) && c.adam_eps > 0.0, "adam_eps", c.adam_eps, "finite and > 0",
          __LINE__);
  require(std::isfinite(c.weight_decay) && c.weight_decay >= 0.0, "weight_decay", c.weight_decay,
          "finite and >= 0", __LINE__);
  require(std::isfinite(c.advantage_epsilon) && c.advantage_epsilon > 0.0, "advantage_epsilon",
          c.advantage_epsilon, "finite and > 0", __LINE__);
  require(c.mode == PpoMode::Resident || c.mode == PpoMode::HostStaged, "mode",
          static_cast<int>(c.mode), "Resident (0) or HostStaged (1)", __LINE__);
}

nn::AdamWConfig adamw_config(const PpoConfig& c) {
  nn::AdamWConfig a;
  a.lr = c.learning_rate;
  a.beta1 = c.adam_beta1;
  a.beta2 = c.adam_beta2;
  a.eps = c.adam_eps;
  a.weight_decay = c.weight_decay;
  if (c.anneal_lr) {
    a.schedule = nn::LrSchedule::LinearToZero;
    a.steps_per_group = c.epochs * c.minibatches;
    a.total_groups = c.total_updates;
  }
  return a;
}

std::uint64_t config_hash(const PpoConfig& c) {
  Fnv1a h;
  h.add(std::uint32_t{1});  // hash layout version
  h.add(c.env_count);
  h.add(c.rollout_steps);
  h.add(c.epochs);
  h.add(c.minibatches);
  h.add(c.hidden.size());
  for (std::size_t width : c.hidden) h.add(width);
  for (double v : {c.learning_rate, c.gamma, c.gae_lambda, c.clip_coef, c.entropy_coef,
                   c.value_coef, c.max_grad_norm, c.adam_beta1, c.adam_beta2, c.adam_eps,
                   c.weight_decay, c.advantage_epsilon})
    h.add(v);
  h.add(c.anneal_lr);
  h.add(c.total_updates);
  h.add(c.clip_value_loss);
  h.add(c.normalize_advantages);
  h.add(c.seed);
  h.add(static_cast<int>(c.mode));
  return h.value();
}

}  // namespace resident::ppo
