#include "tests/reference/gae_reference.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace resident::reference {

namespace {

void require_size(const char* name, std::size_t size, std::size_t expected) {
  if (size != expected)
    throw std::invalid_argument("compute_gae: " + std::string(name) + " has " +
                                std::to_string(size) + " elements, need " +
                                std::to_string(expected));
}

void require_unit_interval(const char* name, double value) {
  if (!(value >= 0.0 && value <= 1.0))
    throw std::invalid_argument("compute_gae: " + std::string(name) + " = " +
                                std::to_string(value) + ", allowed [0, 1]");
}

}  // namespace

GaeResult compute_gae(const GaeRollout& rollout, double gamma, double lambda) {
  const std::size_t steps = rollout.steps;
  const std::size_t envs = rollout.env_count;
  if (steps == 0 || envs == 0)
    throw std::invalid_argument("compute_gae: T = " + std::to_string(steps) +
                                ", N = " + std::to_string(envs) + ", both must be >= 1");
  require_size("rewards", rollout.rewards.size(), steps * envs);
  require_size("values", rollout.values.size(), (steps + 1) * envs);
  require_size("terminated", rollout.terminated.size(), steps * envs);
  require_size("truncated", rollout.truncated.size(), steps * envs);
  require_size("final_values", rollout.final_values.size(), steps * envs);
  require_unit_interval("gamma", gamma);
  require_unit_interval("lambda", lambda);

  GaeResult result;
  result.advantages.resize(steps * envs);
  result.returns.resize(steps * envs);
  for (std::size_t n = 0; n < envs; ++n) {
    double next_advantage = 0.0;  // A_{t+1}; A_T = 0
    for (std::size_t t = steps; t-- > 0;) {
      const std::size_t i = t * envs + n;
      const double value = rollout.values[i];
      double advantage = 0.0;
      if (rollout.terminated[i]) {
        advantage = rollout.rewards[i] - value;
      } else if (rollout.truncated[i]) {
        advantage = rollout.rewards[i] + gamma * rollout.final_values[i] - value;
      } else {
        const double delta = rollout.rewards[i] + gamma * rollout.values[i + envs] - value;
        advantage = delta + gamma * lambda * next_advantage;
      }
      result.advantages[i] = advantage;
      result.returns[i] = advantage + value;
      next_advantage = advantage;
    }
  }
  return result;
}

std::vector<double> normalize_advantages(std::span<const double> advantages, double epsilon) {
  if (advantages.empty()) throw std::invalid_argument("normalize_advantages: no advantages");
  if (!(epsilon > 0.0) || !std::isfinite(epsilon))
    throw std::invalid_argument("normalize_advantages: epsilon = " + std::to_string(epsilon) +
                                ", need finite and > 0");
  const auto count = static_cast<double>(advantages.size());
  double sum = 0.0;
  for (const double a : advantages) sum += a;
  const double mean = sum / count;
  double squares = 0.0;
  for (const double a : advantages) squares += (a - mean) * (a - mean);
  const double scale = std::sqrt(squares / count) + epsilon;
  std::vector<double> normalized(advantages.size());
  for (std::size_t i = 0; i < advantages.size(); ++i)
    normalized[i] = (advantages[i] - mean) / scale;
  return normalized;
}

}  // namespace resident::reference
