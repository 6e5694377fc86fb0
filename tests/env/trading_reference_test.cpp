// The trading environment reference: rewards with costs computed by hand on a tiny series,
// observations (window and position), episode boundaries and auto-reset, the start mapping, and
// what the oracle policy earns on synthetic series with and without a signal.
#include "tests/reference/trading_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <vector>

#include "lib/env/market_series.h"

namespace {

using resident::FeatureNormalization;
using resident::FeatureNormalizationOptions;
using resident::kSyntheticSignalFeature;
using resident::make_synthetic_market;
using resident::normalize_features;
using resident::SyntheticMarket;
using resident::SyntheticMarketConfig;
using resident::reference::oracle_policy_earnings;
using resident::reference::PolicyEarnings;
using resident::reference::TradingBatchState;
using resident::reference::TradingBatchStep;
using resident::reference::TradingReference;
using resident::reference::TradingReferenceConfig;
using resident::reference::TradingSeriesView;

constexpr std::int32_t kShort = 0;
constexpr std::int32_t kFlat = 1;
constexpr std::int32_t kLong = 2;

// T = 6 steps, F = 2 features x[t, f] = 10 t + f, returns that are exact binary fractions, so
// every reward below is exact in float. W = 2, L = 2, cost 0.25: starts in [1, 3] (S = 3).
struct TinySeries {
  std::vector<float> features = {0, 1, 10, 11, 20, 21, 30, 31, 40, 41, 50, 51};
  std::vector<float> returns = {0.5f, -0.25f, 1.0f, -2.0f, 0.125f, 4.0f};
  TradingReferenceConfig config{2, 2, 0.25f};
  TradingReference reference() const { return TradingReference({features, returns, 2}, config); }
};

std::vector<float> observe(const TradingReference& reference, const TradingBatchState& state) {
  std::vector<float> observations(state.env_count() * reference.observation_size());
  reference.observe(state, observations);
  return observations;
}

TEST(TradingReference, StartsMapDrawsOntoTheValidRange) {
  const TinySeries tiny;
  const TradingReference reference = tiny.reference();
  EXPECT_EQ(reference.observation_size(), 5u);
  EXPECT_EQ(reference.first_start(), 1u);
  EXPECT_EQ(reference.start_count(), 3u);
  // s = 1 + floor(d * 3 / 2^32): the thirds of the draw range.
  EXPECT_EQ(reference.start_from_draw(0u), 1u);
  EXPECT_EQ(reference.start_from_draw(0x55555555u), 1u);  // 3 d = 2^32 - 1
  EXPECT_EQ(reference.start_from_draw(0x55555556u), 2u);  // 3 d = 2^32 + 2
  EXPECT_EQ(reference.start_from_draw(0x80000000u), 2u);
  EXPECT_EQ(reference.start_from_draw(0xAAAAAAABu), 3u);
  EXPECT_EQ(reference.start_from_draw(0xFFFFFFFFu), 3u);
}

// Two envs over one episode each, then the auto-reset:
//   reset: env 0 starts at 1 (draw 0), env 1 at 3 (draw 2^32 - 1); both flat.
//   step 1: env 0 long  at t=1: reward = +1 * r[1] - 0.25 * |1 - 0|  = -0.25 - 0.25 = -0.5
//           env 1 short at t=3: reward = -1 * r[3] - 0.25 * |-1 - 0| =  2 - 0.25    =  1.75
//   step 2: env 0 short at t=2: reward = -1 * r[2] - 0.25 * |-1 - 1| = -1 - 0.5     = -1.5
//           env 1 flat  at t=4: reward =  0 * r[4] - 0.25 * |0 + 1|  = -0.25
//   both episodes end (L = 2): returns -2 and 1.5; final observations at t = 3 and t = 5;
//   reset draws 2^31 and 0 restart them at 2 and 1.
TEST(TradingReference, HandComputedRewardsWithCostsAndOneEpisode) {
  const TinySeries tiny;
  const TradingReference reference = tiny.reference();
  TradingBatchState state = reference.reset(std::vector<std::uint32_t>{0u, 0xFFFFFFFFu});
  EXPECT_EQ(state.start, (std::vector<std::int32_t>{1, 3}));
  // Windows of rows (t - 1, t), oldest first, then the position.
  EXPECT_EQ(observe(reference, state), (std::vector<float>{0, 1, 10, 11, 0, 20, 21, 30, 31, 0}));

  // Reset draws are read only where an episode ends: none does on the first step.
  const std::vector<std::uint32_t> unused_draws = {0x12345678u, 0x9ABCDEF0u};
  const TradingBatchStep first =
      reference.step(state, std::vector<std::int32_t>{kLong, kShort}, unused_draws);
  EXPECT_EQ(first.rewards, (std::vector<float>{-0.5f, 1.75f}));
  EXPECT_EQ(first.truncated, (std::vector<std::uint8_t>{0, 0}));
  for (const float v : first.final_observations) EXPECT_TRUE(std::isnan(v));
  for (const float v : first.episode_returns) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(state.start, (std::vector<std::int32_t>{1, 3}));
  EXPECT_EQ(state.step_in_episode, (std::vector<std::int32_t>{1, 1}));
  EXPECT_EQ(observe(reference, state), (std::vector<float>{10, 11, 20, 21, 1, 30, 31, 40, 41, -1}));

  const TradingBatchStep second = reference.step(state, std::vector<std::int32_t>{kShort, kFlat},
                                                 std::vector<std::uint32_t>{0x80000000u, 0u});
  EXPECT_EQ(second.rewards, (std::vector<float>{-1.5f, -0.25f}));
  EXPECT_EQ(second.truncated, (std::vector<std::uint8_t>{1, 1}));
  EXPECT_EQ(second.episode_returns, (std::vector<float>{-2.0f, 1.5f}));
  EXPECT_EQ(second.final_observations, (std::vector<float>{20, 21, 30, 31, -1, 40, 41, 50, 51, 0}));

  // Auto-reset: new starts, flat, step 0, return 0.
  EXPECT_EQ(state.start, (std::vector<std::int32_t>{2, 1}));
  EXPECT_EQ(state.step_in_episode, (std::vector<std::int32_t>{0, 0}));
  EXPECT_EQ(state.position, (std::vector<std::int32_t>{0, 0}));
  EXPECT_EQ(state.episode_return, (std::vector<float>{0.0f, 0.0f}));
  EXPECT_EQ(observe(reference, state), (std::vector<float>{10, 11, 20, 21, 0, 0, 1, 10, 11, 0}));
}

// Holding a position costs nothing; reversing it costs 2 c; a flat position earns nothing.
TEST(TradingReference, CostIsPerUnitOfPositionChange) {
  const TinySeries tiny;
  const TradingReference reference =
      TradingReference({tiny.features, tiny.returns, 2}, TradingReferenceConfig{2, 3, 0.25f});
  TradingBatchState state = reference.reset(std::vector<std::uint32_t>{0u, 0u, 0u});
  const std::vector<std::uint32_t> draws(3, 0u);
  // t = 1, 2, 3 with r = -0.25, 1, -2.
  const TradingBatchStep a =
      reference.step(state, std::vector<std::int32_t>{kLong, kLong, kFlat}, draws);
  EXPECT_EQ(a.rewards, (std::vector<float>{-0.5f, -0.5f, 0.0f}));
  const TradingBatchStep b =
      reference.step(state, std::vector<std::int32_t>{kLong, kShort, kFlat}, draws);
  EXPECT_EQ(b.rewards, (std::vector<float>{1.0f, -1.5f, 0.0f}));  // hold: 1; reverse: -1 - 0.5
  const TradingBatchStep c =
      reference.step(state, std::vector<std::int32_t>{kShort, kShort, kShort}, draws);
  EXPECT_EQ(c.rewards, (std::vector<float>{1.5f, 2.0f, 1.75f}));
  EXPECT_EQ(c.episode_returns, (std::vector<float>{2.0f, 0.0f, 1.75f}));
}

// Random actions and draws on a longer series: every episode lasts exactly L steps, starts stay
// in [W - 1, T - L - 1], each reward is the documented formula at the env's current time, and
// each final observation ends at row s + L (valid rows only).
TEST(TradingReference, EpisodesLastExactlyLStepsFromValidStarts) {
  constexpr std::size_t kSteps = 60;
  constexpr std::size_t kFeatures = 3;
  TradingReferenceConfig config{5, 7, 0.003f};
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> features(kSteps * kFeatures);
  std::vector<float> returns(kSteps);
  for (float& v : features) v = normal(rng);
  for (float& r : returns) r = 0.01f * normal(rng);
  const TradingReference reference({features, returns, kFeatures}, config);
  ASSERT_EQ(reference.start_count(), kSteps - 5 - 7 + 1);

  constexpr std::size_t kEnvs = 9;
  std::vector<std::uint32_t> draws(kEnvs);
  const auto next_draws = [&] {
    for (std::uint32_t& d : draws) d = static_cast<std::uint32_t>(rng());
    return draws;
  };
  TradingBatchState state = reference.reset(next_draws());
  std::vector<std::int32_t> actions(kEnvs);
  for (int step = 1; step <= 70; ++step) {
    const TradingBatchState before = state;
    for (std::int32_t& a : actions) a = static_cast<std::int32_t>(rng() % 3);
    const TradingBatchStep out = reference.step(state, actions, next_draws());
    const bool episode_end = step % 7 == 0;
    for (std::size_t n = 0; n < kEnvs; ++n) {
      ASSERT_GE(before.start[n], 4);
      ASSERT_LE(before.start[n], static_cast<std::int32_t>(kSteps - 7 - 1));
      const auto t = static_cast<std::size_t>(before.start[n] + before.step_in_episode[n]);
      const std::int32_t position = actions[n] - 1;
      const float expected_reward =
          static_cast<float>(position) * returns[t] -
          config.cost_per_unit * static_cast<float>(std::abs(position - before.position[n]));
      EXPECT_EQ(out.rewards[n], expected_reward);
      ASSERT_EQ(out.truncated[n], episode_end ? 1 : 0) << "env " << n << " step " << step;
      if (!episode_end) continue;
      // The final window is rows s + L - W + 1 .. s + L.
      const auto last_row = static_cast<std::size_t>(before.start[n]) + 7;
      ASSERT_LT(last_row, kSteps);
      const float* final_row = &out.final_observations[n * reference.observation_size()];
      EXPECT_EQ(final_row[4 * kFeatures + 2], features[last_row * kFeatures + 2]);
      EXPECT_EQ(final_row[0], features[(last_row - 4) * kFeatures]);
      EXPECT_EQ(final_row[5 * kFeatures], static_cast<float>(position));
      EXPECT_EQ(state.start[n], static_cast<std::int32_t>(reference.start_from_draw(draws[n])));
    }
  }
}

TEST(TradingReference, RejectsInvalidSetupsAndActions) {
  const TinySeries tiny;
  const TradingSeriesView view{tiny.features, tiny.returns, 2};
  EXPECT_THROW(TradingReference(view, TradingReferenceConfig{4, 3, 0.0f}),
               std::invalid_argument);                                          // T = 6 < W + L = 7
  EXPECT_NO_THROW(TradingReference(view, TradingReferenceConfig{4, 2, 0.0f}));  // T = W + L
  EXPECT_THROW(TradingReference(view, TradingReferenceConfig{0, 2, 0.0f}), std::invalid_argument);
  EXPECT_THROW(TradingReference(view, TradingReferenceConfig{2, 0, 0.0f}), std::invalid_argument);
  EXPECT_THROW(TradingReference(view, TradingReferenceConfig{2, 2, -0.1f}), std::invalid_argument);
  EXPECT_THROW(TradingReference(TradingSeriesView{tiny.features, tiny.returns, 3},
                                TradingReferenceConfig{2, 2, 0.0f}),
               std::invalid_argument);  // 12 values are not 6 x 3

  const TradingReference reference = tiny.reference();
  TradingBatchState state = reference.reset(std::vector<std::uint32_t>{0u});
  const std::vector<std::uint32_t> draws{0u};
  EXPECT_THROW(reference.step(state, std::vector<std::int32_t>{3}, draws), std::invalid_argument);
  EXPECT_THROW(reference.step(state, std::vector<std::int32_t>{-1}, draws), std::invalid_argument);
  EXPECT_THROW(reference.step(state, std::vector<std::int32_t>{1, 1}, draws),
               std::invalid_argument);
  EXPECT_THROW(reference.reset({}), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Oracle

struct OracleRun {
  PolicyEarnings earnings;
  double mean_absolute_return = 0.0;  // over the whole series
};

// The oracle on a synthetic series of 50,000 steps: W = 16, L = 128, 32 envs x 16 episodes.
OracleRun run_oracle(double signal_strength, float cost) {
  SyntheticMarketConfig market_config;
  market_config.seed = 21;
  market_config.steps = 50000;
  market_config.signal_strength = signal_strength;
  const SyntheticMarket market = make_synthetic_market(market_config);
  FeatureNormalizationOptions normalization;
  normalization.kind = FeatureNormalization::Global;
  const std::vector<float> normalized = normalize_features(market.series, normalization);
  const std::size_t f = market.series.feature_count;
  std::vector<float> signal(market.series.steps);
  for (std::size_t t = 0; t < signal.size(); ++t)
    signal[t] = market.series.features[t * f + kSyntheticSignalFeature];

  const TradingReference reference({normalized, market.series.next_returns, f},
                                   TradingReferenceConfig{16, 128, cost});
  OracleRun run;
  run.earnings = oracle_policy_earnings(reference, signal, 32, 16, 5);
  for (const float r : market.series.next_returns) run.mean_absolute_return += std::fabs(r);
  run.mean_absolute_return /= static_cast<double>(market.series.steps);
  const PolicyEarnings& e = run.earnings;
  std::printf(
      "oracle, strength %.2f, cost %.4f: %zu episodes, mean episode return %.5f (se %.5f, t = "
      "%.1f), mean reward per step %.3g\n",
      signal_strength, static_cast<double>(cost), e.episodes, e.mean_episode_return,
      e.episode_return_standard_error, e.mean_episode_return / e.episode_return_standard_error,
      e.mean_reward_per_step);
  return run;
}

// With a signal the oracle's position has the next return's sign with probability
// (1 + strength) / 2, so it earns strength * E|r| per step before costs: positive and
// significant. The per-step mean is checked against strength * mean |r| of the series within 4
// standard errors of the per-step mean (the episode return's standard error / L).
TEST(TradingOracle, EarnsAPositiveMeanWithASignal) {
  const double strength = 0.3;
  const OracleRun run = run_oracle(strength, 0.0f);
  const PolicyEarnings& e = run.earnings;
  EXPECT_EQ(e.episodes, 32u * 16u);
  EXPECT_EQ(e.steps, 32u * 16u * 128u);
  EXPECT_GT(e.mean_episode_return / e.episode_return_standard_error, 10.0);
  const double expected_per_step = strength * run.mean_absolute_return;
  std::printf("expected per step: strength * mean |r| = %.3g\n", expected_per_step);
  EXPECT_NEAR(e.mean_reward_per_step, expected_per_step,
              4.0 * e.episode_return_standard_error / 128.0);

  // Costs: about one unit of position change per step (the oracle flips about half the time,
  // by 2 units), still positive at 5 basis points.
  const OracleRun with_cost = run_oracle(strength, 0.0005f);
  EXPECT_LT(with_cost.earnings.mean_reward_per_step, e.mean_reward_per_step);
  EXPECT_GT(
      with_cost.earnings.mean_episode_return / with_cost.earnings.episode_return_standard_error,
      4.0);
}

// Without a signal the oracle's sign is a coin flip independent of the return: its mean is 0
// within 4 standard errors (before costs; with costs it only pays them).
TEST(TradingOracle, EarnsNothingWithoutASignal) {
  const OracleRun run = run_oracle(0.0, 0.0f);
  const PolicyEarnings& e = run.earnings;
  EXPECT_LE(std::fabs(e.mean_episode_return), 4.0 * e.episode_return_standard_error);
  const OracleRun with_cost = run_oracle(0.0, 0.0005f);
  EXPECT_LT(with_cost.earnings.mean_episode_return, 0.0);
}

TEST(TradingOracle, IsDeterministicForASeed) {
  const TinySeries tiny;
  const TradingReference reference = tiny.reference();
  const std::vector<float> signal = {1.0f, -1.0f, 0.0f, 2.0f, -3.0f, 1.0f};
  const PolicyEarnings a = oracle_policy_earnings(reference, signal, 4, 3, 77);
  const PolicyEarnings b = oracle_policy_earnings(reference, signal, 4, 3, 77);
  EXPECT_EQ(a.mean_episode_return, b.mean_episode_return);
  EXPECT_EQ(a.episode_return_standard_error, b.episode_return_standard_error);
  EXPECT_EQ(a.episodes, 12u);
  EXPECT_THROW(oracle_policy_earnings(reference, std::vector<float>(5), 4, 3, 77),
               std::invalid_argument);
}

}  // namespace
