// The GAE(lambda) reference: a 3-step example computed by hand with a termination and
// truncations, the two limits (lambda = 1, gamma = 1: Monte Carlo returns minus values;
// lambda = 0: one-step TD errors), the explicit-sum form A_t = sum_l (gamma lambda)^l delta_{t+l}
// on random rollouts with dones, the trace cut, and the advantage normalization.
#include "tests/reference/gae_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

namespace {

using resident::reference::compute_gae;
using resident::reference::GaeResult;
using resident::reference::GaeRollout;
using resident::reference::normalize_advantages;

// Owns the arrays a GaeRollout views.
struct RolloutData {
  std::size_t steps = 0;
  std::size_t envs = 0;
  std::vector<double> rewards;
  std::vector<double> values;
  std::vector<std::uint8_t> terminated;
  std::vector<std::uint8_t> truncated;
  std::vector<double> final_values;

  GaeRollout view() const {
    return {steps, envs, rewards, values, terminated, truncated, final_values};
  }
  std::size_t at(std::size_t t, std::size_t n) const { return t * envs + n; }
};

// T steps of N envs: rewards and values uniform in [-1, 1] and [-2, 2], each step terminated
// with probability 0.06 and (otherwise) truncated with probability 0.06, final values uniform.
RolloutData random_rollout(std::size_t steps, std::size_t envs, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> reward(-1.0, 1.0);
  std::uniform_real_distribution<double> value(-2.0, 2.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  RolloutData data;
  data.steps = steps;
  data.envs = envs;
  for (std::size_t i = 0; i < steps * envs; ++i) {
    data.rewards.push_back(reward(rng));
    const double u = unit(rng);
    data.terminated.push_back(u < 0.06 ? 1 : 0);
    data.truncated.push_back(u >= 0.06 && u < 0.12 ? 1 : 0);
    data.final_values.push_back(value(rng));
  }
  for (std::size_t i = 0; i < (steps + 1) * envs; ++i) data.values.push_back(value(rng));
  return data;
}

// The one-step TD error of (t, n), by its definition.
double td_error(const RolloutData& d, std::size_t t, std::size_t n, double gamma) {
  const std::size_t i = d.at(t, n);
  double bootstrap = d.values[d.at(t + 1, n)];
  if (d.terminated[i]) {
    bootstrap = 0.0;
  } else if (d.truncated[i]) {
    bootstrap = d.final_values[i];
  }
  return d.rewards[i] + gamma * bootstrap - d.values[i];
}

bool episode_ends(const RolloutData& d, std::size_t t, std::size_t n) {
  return d.terminated[d.at(t, n)] || d.truncated[d.at(t, n)];
}

// Three steps of four environments, gamma = 0.9, lambda = 0.8 (gamma lambda = 0.72):
//   env 0: terminated at t = 1, truncated at t = 2 (final value 4)
//     t=2: delta = 3 + 0.9 * 4 - 1.5 = 5.1                          A = 5.1
//     t=1: delta = 2 - 1 = 1                                          A = 1
//     t=0: delta = 1 + 0.9 * 1 - 0.5 = 1.4                            A = 1.4 + 0.72 * 1 = 2.12
//   env 1: no done, bootstrapped by V_3 = 4
//     t=2: delta = 2 + 0.9 * 4 - 3 = 2.6                              A = 2.6
//     t=1: delta = -1 + 0.9 * 3 - 2 = -0.3                            A = -0.3 + 0.72 * 2.6 = 1.572
//     t=0: delta = 0.5 + 0.9 * 2 - 1 = 1.3                            A = 1.3 + 0.72 * 1.572
//     = 2.43184
//   env 2: truncated at t = 0 (final value 10): the trace is cut there
//     t=2: delta = 1 + 0.9 * 5 - 4 = 1.5                              A = 1.5
//     t=1: delta = 1 + 0.9 * 4 - 3 = 1.6                              A = 1.6 + 0.72 * 1.5 = 2.68
//     t=0: delta = 1 + 0.9 * 10 - 2 = 8                               A = 8
//   env 3: terminated and truncated at t = 1 (termination wins: no bootstrap), final value 7
//     t=2: delta = 0 + 0.9 * 1 - 2 = -1.1                             A = -1.1
//     t=1: delta = 1 - 1 = 0                                          A = 0
//     t=0: delta = 2 + 0.9 * 1 - 3 = -0.1                             A = -0.1 + 0.72 * 0 = -0.1
// returns = A + V.
TEST(GaeReference, HandComputedThreeStepExample) {
  RolloutData d;
  d.steps = 3;
  d.envs = 4;
  //            t=0 envs 0..3        t=1                    t=2
  d.rewards = {1.0, 0.5, 1.0, 2.0, 2.0, -1.0, 1.0, 1.0, 3.0, 2.0, 1.0, 0.0};
  d.values = {0.5, 1.0, 2.0, 3.0,   // t=0
              1.0, 2.0, 3.0, 1.0,   // t=1
              1.5, 3.0, 4.0, 2.0,   // t=2
              2.0, 4.0, 5.0, 1.0};  // t=3 (bootstrap row)
  d.terminated = {0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0};
  d.truncated = {0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Read only where truncated and not terminated: NaN elsewhere must not leak.
  d.final_values = {nan, nan, 10.0, nan, nan, nan, nan, 7.0, 4.0, nan, nan, nan};

  const GaeResult result = compute_gae(d.view(), 0.9, 0.8);
  const std::vector<double> expected = {2.12, 2.43184, 8.0,  -0.1,   // t=0
                                        1.0,  1.572,   2.68, 0.0,    // t=1
                                        5.1,  2.6,     1.5,  -1.1};  // t=2
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(result.advantages[i], expected[i], 1e-12) << "t " << i / 4 << " env " << i % 4;
    EXPECT_NEAR(result.returns[i], expected[i] + d.values[i], 1e-12);
  }
}

// lambda = 1, gamma = 1: A_t + V_t is the sum of the rewards from t to the end of the episode
// (the done step included) plus the bootstrap there: 0 after a termination, the final value
// after a truncation, V_T when the rollout ends first.
TEST(GaeReference, LambdaOneGammaOneIsMonteCarloReturnMinusValue) {
  const RolloutData d = random_rollout(40, 5, 1);
  const GaeResult result = compute_gae(d.view(), 1.0, 1.0);
  for (std::size_t n = 0; n < d.envs; ++n) {
    for (std::size_t t = 0; t < d.steps; ++t) {
      double monte_carlo = 0.0;
      std::size_t k = t;
      for (;; ++k) {
        monte_carlo += d.rewards[d.at(k, n)];
        if (episode_ends(d, k, n) || k + 1 == d.steps) break;
      }
      if (d.terminated[d.at(k, n)]) {
        // nothing to add
      } else if (d.truncated[d.at(k, n)]) {
        monte_carlo += d.final_values[d.at(k, n)];
      } else {
        monte_carlo += d.values[d.at(d.steps, n)];
      }
      const std::size_t i = d.at(t, n);
      EXPECT_NEAR(result.advantages[i], monte_carlo - d.values[i], 1e-12)
          << "t " << t << " env " << n;
      EXPECT_NEAR(result.returns[i], monte_carlo, 1e-12);
    }
  }
}

TEST(GaeReference, LambdaZeroIsTheOneStepTdError) {
  const RolloutData d = random_rollout(30, 4, 2);
  const double gamma = 0.97;
  const GaeResult result = compute_gae(d.view(), gamma, 0.0);
  for (std::size_t t = 0; t < d.steps; ++t)
    for (std::size_t n = 0; n < d.envs; ++n)
      EXPECT_NEAR(result.advantages[d.at(t, n)], td_error(d, t, n, gamma), 1e-14)
          << "t " << t << " env " << n;
}

// A_t = sum_{l >= 0} (gamma lambda)^l delta_{t+l}, the sum stopping after the step that ends
// the episode or the rollout: the definition the recurrence implements.
TEST(GaeReference, MatchesTheExplicitSumOfDiscountedTdErrors) {
  const RolloutData d = random_rollout(64, 3, 3);
  const double gamma = 0.99;
  const double lambda = 0.95;
  const GaeResult result = compute_gae(d.view(), gamma, lambda);
  double worst = 0.0;
  for (std::size_t n = 0; n < d.envs; ++n) {
    for (std::size_t t = 0; t < d.steps; ++t) {
      double sum = 0.0;
      double weight = 1.0;
      for (std::size_t k = t; k < d.steps; ++k) {
        sum += weight * td_error(d, k, n, gamma);
        if (episode_ends(d, k, n)) break;
        weight *= gamma * lambda;
      }
      const double error = std::fabs(result.advantages[d.at(t, n)] - sum);
      EXPECT_LE(error, 1e-12) << "t " << t << " env " << n;
      worst = std::max(worst, error);
    }
  }
  std::printf("explicit sum vs recurrence: max |difference| %.2e (tolerance 1e-12)\n", worst);
}

// A done at t cuts the trace: the advantages at and before t do not depend on anything after
// it (here: the rewards and values of the steps after t, which belong to the next episode).
TEST(GaeReference, ADoneCutsTheTrace) {
  for (const bool terminate : {true, false}) {
    RolloutData d = random_rollout(10, 1, 4);
    std::fill(d.terminated.begin(), d.terminated.end(), 0);
    std::fill(d.truncated.begin(), d.truncated.end(), 0);
    const std::size_t done_step = 4;
    (terminate ? d.terminated : d.truncated)[done_step] = 1;
    const GaeResult before = compute_gae(d.view(), 0.99, 0.95);
    for (std::size_t t = done_step + 1; t < d.steps; ++t) {
      d.rewards[t] += 100.0;
      d.values[t] -= 50.0;
    }
    d.values[d.steps] += 10.0;
    const GaeResult after = compute_gae(d.view(), 0.99, 0.95);
    for (std::size_t t = 0; t <= done_step; ++t)
      EXPECT_EQ(after.advantages[t], before.advantages[t])
          << (terminate ? "terminated" : "truncated") << ", t " << t;
    EXPECT_NE(after.advantages[done_step + 1], before.advantages[done_step + 1]);
  }
}

TEST(GaeReference, RejectsBadSizesAndParameters) {
  const RolloutData d = random_rollout(3, 2, 5);
  GaeRollout short_values = d.view();
  short_values.values = short_values.values.subspan(0, 6);  // [T, N] instead of [T + 1, N]
  EXPECT_THROW(compute_gae(short_values, 0.99, 0.95), std::invalid_argument);
  EXPECT_THROW(compute_gae(d.view(), 1.01, 0.95), std::invalid_argument);
  EXPECT_THROW(compute_gae(d.view(), 0.99, -0.1), std::invalid_argument);
  EXPECT_THROW(compute_gae(d.view(), std::nan(""), 0.95), std::invalid_argument);
}

// [1, 2, 3, 4]: mean 2.5, population std sqrt(1.25).
TEST(AdvantageNormalization, UsesMeanAndPopulationStdPlusEpsilon) {
  const std::vector<double> advantages = {1.0, 2.0, 3.0, 4.0};
  const double scale = std::sqrt(1.25) + 1e-8;
  const std::vector<double> normalized = normalize_advantages(advantages);
  for (std::size_t i = 0; i < advantages.size(); ++i)
    EXPECT_DOUBLE_EQ(normalized[i], (advantages[i] - 2.5) / scale);

  const std::vector<double> with_epsilon = normalize_advantages(advantages, 0.5);
  EXPECT_DOUBLE_EQ(with_epsilon[0], -1.5 / (std::sqrt(1.25) + 0.5));

  // A constant batch has std 0: epsilon keeps the division finite and the result is 0.
  for (const double v : normalize_advantages(std::vector<double>(5, 3.0))) EXPECT_EQ(v, 0.0);

  EXPECT_THROW(normalize_advantages(std::vector<double>{}), std::invalid_argument);
  EXPECT_THROW(normalize_advantages(advantages, 0.0), std::invalid_argument);
}

TEST(AdvantageNormalization, GivesZeroMeanAndUnitStdOverTheWholeRollout) {
  const RolloutData d = random_rollout(128, 8, 6);
  const std::vector<double> normalized =
      normalize_advantages(compute_gae(d.view(), 0.99, 0.95).advantages);
  double sum = 0.0;
  double squares = 0.0;
  for (const double v : normalized) sum += v;
  const double mean = sum / static_cast<double>(normalized.size());
  for (const double v : normalized) squares += (v - mean) * (v - mean);
  EXPECT_NEAR(mean, 0.0, 1e-12);
  EXPECT_NEAR(std::sqrt(squares / static_cast<double>(normalized.size())), 1.0, 1e-7);
}

}  // namespace
