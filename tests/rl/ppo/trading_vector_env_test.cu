// The trading env behind PPO's VectorEnv (lib/rl/ppo/trading_vector_env.h) and its pieces.
// CPU (run anywhere): every invalid config field is named before anything touches the device;
// the host policy evaluator of the learning tests (tests/support/trading_policy_eval.h)
// reproduces a rule-based signal follower exactly, earns exactly 0 flat, and charges the cost of
// every position change; the host MLP that plays trained networks there (tests/support/
// host_mlp.h) applies tanh or ReLU as asked.
// GPU: the episode-statistics delta kernel against a CPU sum for N at block edges; the adapter's
// per-update episode statistics against the episodes TradingEnv reports step by step; a save /
// load round trip that replays bit for bit, and refused states that change nothing; PPO on the
// trading env: a whole-update graph equals eager updates bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/rl/ppo/episode_stats_delta.h"
#include "lib/core/device_buffer.h"
#include "lib/env/vector_env.h"
#include "lib/rl/ppo/ppo_trainer.h"
#include "lib/rl/ppo/trading_vector_env.h"
#include "tests/support/gpu.h"
#include "tests/support/host_mlp.h"
#include "tests/support/trading_policy_eval.h"

namespace {

using namespace resident;
using namespace resident::ppo;
namespace eval = resident::test::trading;

TradingVectorEnvConfig small_config(std::size_t envs) {
  TradingVectorEnvConfig c;
  c.market.seed = 11;
  c.market.steps = 600;
  c.market.signal_strength = 0.4;
  c.env_count = envs;
  c.window = 3;
  c.episode_length = 13;
  c.cost_per_unit = 0.0002f;
  c.seed = 5;
  return c;
}

// ----- CPU

void expect_invalid(const TradingVectorEnvConfig& c, const std::string& field) {
  try {
    validate(c);
    ADD_FAILURE() << "accepted an invalid " << field;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos)
        << "message does not name " << field << ": " << e.what();
  }
}

TEST(TradingVectorEnvConfig, EveryInvalidFieldIsNamed) {
  EXPECT_NO_THROW(validate(small_config(4)));
  auto c = small_config(4);
  c.env_count = 0;
  expect_invalid(c, "env_count = 0");
  c = small_config(4);
  c.window = 0;
  expect_invalid(c, "window = 0");
  c = small_config(4);
  c.episode_length = 0;
  expect_invalid(c, "episode_length = 0");
  c = small_config(4);
  c.market.steps = c.window + c.episode_length - 1;
  expect_invalid(c, "market.steps = 15, allowed >= window + episode_length = 16");
  c = small_config(4);
  c.cost_per_unit = -1.0f;
  expect_invalid(c, "cost_per_unit");
  c.cost_per_unit = NAN;
  expect_invalid(c, "cost_per_unit");
  c = small_config(4);
  c.normalization.rolling_window = 0;
  expect_invalid(c, "normalization.rolling_window = 0");
  c = small_config(4);
  c.normalization.epsilon = 0.0;
  expect_invalid(c, "normalization.epsilon");
  c = small_config(4);
  c.market.signal_strength = 1.5;
  expect_invalid(c, "signal_strength");
}

TEST(TradingVectorEnvConfig, ConstructorRefusesBeforeTouchingTheDevice) {
  auto c = small_config(4);
  c.env_count = 0;
  EXPECT_THROW(TradingVectorEnv env(c), Error);  // no CUDA call: passes without a GPU too
}

TEST(TradingPolicyEvaluation, NetworkFollowingTheSignalMatchesTheRuleExactly) {
  const auto c = small_config(1);
  const SyntheticMarket market = make_synthetic_market(c.market);
  const std::vector<float> normalized = normalize_features(market.series, c.normalization);
  const std::size_t f = market.series.feature_count, d = c.window * f + 1;
  // hidden = tanh(normalized signal of the newest row); logits = (-h, 0, h).
  test::HostMlp net;
  net.hidden = test::HostMlp::Hidden::Tanh;
  net.widths = {d, 1, 3};
  net.weights = {std::vector<float>(d, 0.0f), {-1.0f, 0.0f, 1.0f}};
  net.weights[0][(c.window - 1) * f + kSyntheticSignalFeature] = 1.0f;
  net.biases = {{0.0f}, {0.0f, 0.0f, 0.0f}};
  const auto by_net = eval::evaluate(market.series, normalized, c.window, c.episode_length,
                                     c.cost_per_unit,
                                     [&](const float* obs, std::size_t) { return net.greedy(obs); });
  const auto by_rule = eval::evaluate(
      market.series, normalized, c.window, c.episode_length, c.cost_per_unit,
      [&](const float*, std::size_t t) { return normalized[t * f + kSyntheticSignalFeature] > 0 ? 2 : 0; });
  ASSERT_EQ(by_net.episode_returns.size(), (600 - 2 - 1) / 13);  // starts 2, 15, ... <= 586
  EXPECT_EQ(by_net.episode_returns, by_rule.episode_returns);
  EXPECT_GT(by_rule.mean, 0.0) << "a signal of strength 0.4 earns";
  std::printf("  follower of the normalized signal: %zu episodes, %.6f per step, t = %.2f\n",
              by_rule.episode_returns.size(), by_rule.per_step(), by_rule.t);
}

TEST(TradingPolicyEvaluation, FlatEarnsZeroAndEveryChangeIsCharged) {
  const auto c = small_config(1);
  const SyntheticMarket market = make_synthetic_market(c.market);
  const std::vector<float> normalized = normalize_features(market.series, c.normalization);
  const auto flat = eval::evaluate(market.series, normalized, c.window, c.episode_length, 0.5f,
                                   [](const float*, std::size_t) { return 1; });
  for (const double r : flat.episode_returns) EXPECT_EQ(r, 0.0);
  EXPECT_EQ(flat.t, 0.0);
  // Long then short alternately, zero returns: the first step costs c, every later one 2c.
  MarketSeries zero = market.series;
  std::fill(zero.next_returns.begin(), zero.next_returns.end(), 0.0f);
  const auto flip = eval::evaluate(zero, normalized, c.window, c.episode_length, 0.25f,
                                   [](const float*, std::size_t t) { return t % 2 == 0 ? 2 : 0; });
  for (const double r : flip.episode_returns)
    EXPECT_EQ(r, -(0.25 + 0.5 * static_cast<double>(c.episode_length - 1)));
}

// h = act(x), logits = (0, h, -h): flat where h > 0; where x < 0, ReLU gives h = 0 (a three-way
// tie: the first action, short) and tanh h < 0 (long).
TEST(HostMlp, HiddenActivationIsTanhOrRelu) {
  test::HostMlp net;
  net.widths = {1, 1, 3};
  net.weights = {{1.0f}, {0.0f, 1.0f, -1.0f}};
  net.biases = {{0.0f}, {0.0f, 0.0f, 0.0f}};
  const float positive = 2.0f, negative = -2.0f;
  net.hidden = test::HostMlp::Hidden::Relu;
  EXPECT_EQ(net.greedy(&positive), 1);
  EXPECT_EQ(net.greedy(&negative), 0);
  net.hidden = test::HostMlp::Hidden::Tanh;
  EXPECT_EQ(net.greedy(&positive), 1);
  EXPECT_EQ(net.greedy(&negative), 2);
}

// ----- GPU

TEST(EpisodeStatsDelta, MatchesCpuSumsAtBlockEdges) {
  RESIDENT_REQUIRE_GPU();
  std::mt19937_64 rng(3);
  for (const std::size_t n : {std::size_t{1}, std::size_t{255}, std::size_t{256}, std::size_t{257},
                              std::size_t{3001}}) {
    std::uniform_real_distribution<float> value(-50.0f, 50.0f);
    std::uniform_int_distribution<std::uint32_t> count(0, 1000);
    std::vector<float> cumulative(n), snapshot(n);
    std::vector<std::uint32_t> cumulative_count(n), snapshot_count(n);
    double expected_sum = 0.0;
    unsigned long long expected_count = 0;
    for (std::size_t i = 0; i < n; ++i) {
      snapshot[i] = value(rng);
      cumulative[i] = value(rng);
      snapshot_count[i] = count(rng) + (i % 7 == 0 ? 0xffffff00u : 0u);  // some wrap past 2^32
      cumulative_count[i] = snapshot_count[i] + count(rng);
      expected_sum += static_cast<double>(cumulative[i]) - static_cast<double>(snapshot[i]);
      expected_count += static_cast<std::uint32_t>(cumulative_count[i] - snapshot_count[i]);
    }
    DeviceBuffer<float> d_cumulative(n), d_snapshot(n);
    DeviceBuffer<std::uint32_t> d_cumulative_count(n), d_snapshot_count(n);
    DeviceBuffer<double> d_sum(1);
    DeviceBuffer<unsigned long long> d_count(1);
    d_cumulative.upload(cumulative);
    d_snapshot.upload(snapshot);
    d_cumulative_count.upload(cumulative_count);
    d_snapshot_count.upload(snapshot_count);
    d_sum.upload(std::vector<double>{NAN});
    d_count.upload(std::vector<unsigned long long>{~0ull});
    kernels::ppo::launch_episode_stats_delta(d_sum.data(), d_count.data(), d_snapshot.data(),
                                             d_snapshot_count.data(), d_cumulative.data(),
                                             d_cumulative_count.data(), n, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const double sum = d_sum.download()[0];
    EXPECT_EQ(d_count.download()[0], expected_count) << "N = " << n;
    const double tolerance = 1e-12 * static_cast<double>(n) * 100.0;
    EXPECT_NEAR(sum, expected_sum, tolerance) << "N = " << n;
    EXPECT_EQ(d_snapshot.download(), cumulative) << "N = " << n;
    EXPECT_EQ(d_snapshot_count.download(), cumulative_count) << "N = " << n;
    std::printf("  N = %zu: sum %.6f vs %.6f (|diff| %.2e, tolerance %.2e), count %llu\n", n, sum,
                expected_sum, std::abs(sum - expected_sum), tolerance, expected_count);
    // A second call without new episodes reports nothing.
    kernels::ppo::launch_episode_stats_delta(d_sum.data(), d_count.data(), d_snapshot.data(),
                                             d_snapshot_count.data(), d_cumulative.data(),
                                             d_cumulative_count.data(), n, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(d_sum.download()[0], 0.0);
    EXPECT_EQ(d_count.download()[0], 0u);
  }
  EXPECT_THROW(kernels::ppo::launch_episode_stats_delta(nullptr, nullptr, nullptr, nullptr,
                                                        nullptr, nullptr, 0, nullptr),
               Error);
}

struct Stepper {
  TradingVectorEnv& env;
  DeviceBuffer<std::int32_t> actions;
  std::mt19937 rng{17};
  explicit Stepper(TradingVectorEnv& e) : env(e), actions(e.env_count()) {}
  void step() {
    std::vector<std::int32_t> a(env.env_count());
    std::uniform_int_distribution<int> pick(0, 2);
    for (auto& x : a) x = pick(rng);
    actions.upload(a);
    env.step(actions.data(), nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
};

template <class T>
std::vector<T> fetch(const T* device, std::size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

TEST(TradingVectorEnv, EpisodeStatisticsAreTheEpisodesEndedSinceTheLastCall) {
  RESIDENT_REQUIRE_GPU();
  const auto c = small_config(37);
  TradingVectorEnv env(c);
  EXPECT_EQ(env.observation_size(), c.window * env.market().series.feature_count + 1);
  EXPECT_EQ(env.action_count(), 3u);
  env.reset(c.seed, nullptr);
  Stepper stepper(env);
  const VectorEnvStep out = env.step_outputs();
  EXPECT_EQ(out.observations, env.observations());
  double expected_sum = 0.0;
  unsigned long long expected_count = 0;
  std::size_t checks = 0;
  for (std::size_t s = 1; s <= 5 * c.episode_length + 3; ++s) {
    stepper.step();
    const auto dones = fetch(out.truncated, c.env_count);
    const auto returns = fetch(env.trading().episode_returns(), c.env_count);
    for (const auto t : fetch(out.terminated, c.env_count)) ASSERT_EQ(t, 0u);
    for (std::size_t n = 0; n < c.env_count; ++n)
      if (dones[n] != 0) {
        expected_sum += static_cast<double>(returns[n]);
        ++expected_count;
      }
    if (s % 9 == 0 || s % c.episode_length == 0) {  // calls with and without ended episodes
      env.collect_episode_stats(nullptr);
      const double sum = fetch(env.episode_return_sum(), 1)[0];
      const unsigned long long count = fetch(env.episode_count(), 1)[0];
      EXPECT_EQ(count, expected_count) << "step " << s;
      EXPECT_NEAR(sum, expected_sum, 1e-5 + 1e-5 * std::abs(expected_sum)) << "step " << s;
      expected_sum = 0.0;
      expected_count = 0;
      ++checks;
    }
  }
  EXPECT_GT(checks, 5u);
  // reset clears the statistics; with another seed the env is rebuilt and draws other starts.
  const auto starts = fetch(env.trading().state().start, c.env_count);
  env.reset(c.seed + 1, nullptr);
  env.collect_episode_stats(nullptr);
  EXPECT_EQ(fetch(env.episode_count(), 1)[0], 0u);
  EXPECT_NE(fetch(env.trading().state().start, c.env_count), starts);
}

TEST(TradingVectorEnv, SaveLoadReplaysBitForBitAndRefusesForeignStates) {
  RESIDENT_REQUIRE_GPU();
  const auto c = small_config(19);
  TradingVectorEnv env(c);
  Stepper stepper(env);
  for (int i = 0; i < 20; ++i) stepper.step();
  env.collect_episode_stats(nullptr);
  const std::vector<std::byte> saved = env.save_state(nullptr);
  const auto d = env.observation_size();
  auto run = [&] {
    std::vector<float> trace;
    Stepper s(env);  // same action seed every time
    for (int i = 0; i < 30; ++i) {
      s.step();
      for (float v : fetch(env.observations(), c.env_count * d)) trace.push_back(v);
      for (float v : fetch(env.step_outputs().rewards, c.env_count)) trace.push_back(v);
    }
    env.collect_episode_stats(nullptr);
    trace.push_back(static_cast<float>(fetch(env.episode_return_sum(), 1)[0]));
    trace.push_back(static_cast<float>(fetch(env.episode_count(), 1)[0]));
    return trace;
  };
  const auto first = run();
  env.load_state(saved, nullptr);
  const auto second = run();
  ASSERT_EQ(first.size(), second.size());
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0);

  // Refused: truncated, another env count, another series; nothing changes.
  const auto before = env.save_state(nullptr);
  EXPECT_THROW(env.load_state(std::span(saved).first(saved.size() - 1), nullptr), Error);
  TradingVectorEnv other_count(small_config(20));
  EXPECT_THROW(env.load_state(other_count.save_state(nullptr), nullptr), Error);
  auto other_series_config = small_config(19);
  other_series_config.market.seed = 12;
  TradingVectorEnv other_series(other_series_config);
  EXPECT_THROW(env.load_state(other_series.save_state(nullptr), nullptr), Error);
  EXPECT_EQ(env.save_state(nullptr), before);
}

TEST(TradingVectorEnv, PpoWholeUpdateGraphEqualsEagerUpdates) {
  RESIDENT_REQUIRE_GPU();
  PpoUpdateResult results[2][3];
  for (int graphs = 0; graphs < 2; ++graphs) {
    PpoConfig p;
    p.env_count = 16;
    p.rollout_steps = 32;
    p.use_graphs = graphs == 1;
    p.seed = 5;
    TradingVectorEnv env(small_config(16));
    PpoTrainer trainer(p, env);
    for (auto& r : results[graphs]) r = trainer.train_update();
  }
  for (int u = 0; u < 3; ++u) {
    EXPECT_EQ(std::memcmp(&results[0][u], &results[1][u], sizeof(PpoUpdateResult)), 0)
        << "update " << u;
    EXPECT_TRUE(std::isfinite(results[1][u].policy_loss) && std::isfinite(results[1][u].value_loss));
    std::printf("  update %d: policy loss %+.5f, value loss %.3g, %u episodes, mean return %+.4f\n",
                u, results[1][u].policy_loss, results[1][u].value_loss, results[1][u].episodes,
                results[1][u].mean_episode_return);
  }
  EXPECT_GT(results[1][2].episodes, 0u) << "16 envs x 96 steps end episodes of 13 steps";
}

}  // namespace
