// Host-side evaluation of a trading policy on a market series, for the PPO and DQN trading
// tests (the policy: a rule, or a trained network through tests/support/host_mlp.h): the series
// is cut into consecutive non-overlapping episodes of L steps (starts W - 1, W - 1 + L, ... while
// start <= T - L - 1, every one flat at its start), each step with the env's semantics
// (tests/reference/trading_reference.h: observation = W normalized rows t - W + 1 .. t, oldest
// first, then the position; reward = float(p') * r[t] - c * float(|p' - p|) in float), and the
// episode returns summed in double. Deterministic; no CUDA.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "lib/env/market_series.h"

namespace resident::test::trading {

struct Earnings {
  std::vector<double> episode_returns;
  std::size_t steps_per_episode = 0;
  double mean = 0.0;  // mean episode return
  double sd = 0.0;    // sample standard deviation (n - 1)
  double t = 0.0;     // one-sample t statistic of the mean against 0: mean / (sd / sqrt(n))
  double per_step() const { return mean / static_cast<double>(steps_per_episode); }
};

inline Earnings summarize(std::vector<double> returns, std::size_t length) {
  Earnings e;
  e.steps_per_episode = length;
  const double n = static_cast<double>(returns.size());
  for (const double r : returns) e.mean += r;
  e.mean /= n;
  double var = 0.0;
  for (const double r : returns) var += (r - e.mean) * (r - e.mean);
  e.sd = returns.size() > 1 ? std::sqrt(var / (n - 1.0)) : NAN;
  e.t = e.sd > 0.0 ? e.mean / (e.sd / std::sqrt(n)) : (e.mean == 0.0 ? 0.0 : NAN);
  e.episode_returns = std::move(returns);
  return e;
}

// policy(observation [W * F + 1], t) -> action in {0, 1, 2} (short, flat, long).
template <class Policy>
Earnings evaluate(const MarketSeries& series, const std::vector<float>& normalized,
                  std::size_t window, std::size_t length, float cost, Policy&& policy) {
  const std::size_t f = series.feature_count;
  std::vector<float> observation(window * f + 1);
  std::vector<double> returns;
  for (std::size_t start = window - 1; start + length + 1 <= series.steps; start += length) {
    int position = 0;
    double episode = 0.0;
    for (std::size_t k = 0; k < length; ++k) {
      const std::size_t t = start + k;
      std::copy(normalized.begin() + static_cast<std::ptrdiff_t>((t + 1 - window) * f),
                normalized.begin() + static_cast<std::ptrdiff_t>((t + 1) * f), observation.begin());
      observation[window * f] = static_cast<float>(position);
      const int next = static_cast<int>(policy(observation.data(), t)) - 1;
      const float reward = static_cast<float>(next) * series.next_returns[t] -
                           cost * static_cast<float>(std::abs(next - position));
      episode += static_cast<double>(reward);
      position = next;
    }
    returns.push_back(episode);
  }
  return summarize(std::move(returns), length);
}

// What a trading learning test measures on its held-out series: the trained agent's greedy
// policy, the oracle (the sign of the next return) and the signal follower, on the same episodes.
struct HeldOutOutcome {
  Earnings greedy, oracle, follower;
};

// One-sided p < 0.001 over ~400 episodes.
inline constexpr double kCriticalT = 3.1;

inline void print_held_out(const char* agent, std::size_t series_steps, const HeldOutOutcome& o) {
  std::printf("  held-out series (%zu steps), %zu episodes of %zu steps, per step:\n"
              "    greedy %s policy %+.6f (episode mean %+.5f, sd %.5f, t = %.2f)\n"
              "    oracle %+.6f, signal follower %+.6f (t = %.2f), flat 0\n",
              series_steps, o.greedy.episode_returns.size(), o.greedy.steps_per_episode, agent,
              o.greedy.per_step(), o.greedy.mean, o.greedy.sd, o.greedy.t, o.oracle.per_step(),
              o.follower.per_step(), o.follower.t);
}

// Trained where the series has a signal: the held-out series must carry it (the follower earns
// significantly) and the greedy policy must earn significantly.
inline void expect_learned_the_signal(const HeldOutOutcome& o, std::size_t episodes) {
  ASSERT_EQ(o.greedy.episode_returns.size(), episodes);
  EXPECT_GT(o.follower.t, kCriticalT) << "the held-out series itself carries the signal";
  EXPECT_GT(o.greedy.mean, 0.0);
  EXPECT_GT(o.greedy.t, kCriticalT) << "not significant at one-sided p < 0.001";
}

// The negative control, trained on a series without a signal: no significant earnings.
inline void expect_no_significant_earnings(const HeldOutOutcome& o, std::size_t episodes) {
  ASSERT_EQ(o.greedy.episode_returns.size(), episodes);
  const bool significant = o.greedy.mean > 0.0 && o.greedy.t > kCriticalT;
  std::printf("  negative control: %s\n",
              significant            ? "SIGNIFICANT (the control failed)"
              : o.greedy.mean <= 0.0 ? "not significant: mean <= 0"
                                     : "not significant: mean > 0 but t < 3.1");
  EXPECT_FALSE(significant) << "t = " << o.greedy.t << " on a series without a signal";
}

}  // namespace resident::test::trading
