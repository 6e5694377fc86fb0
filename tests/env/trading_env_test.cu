// TradingEnv on the GPU against the CPU reference (tests/reference/trading_reference.h), step by
// step on a small synthetic market (make_synthetic_market, rolling-normalized features), for
// N = 1, 7 (a partial block) and 1024 (eight full blocks) over several episodes. The reference
// gets the same start draws: episode e of env n starts from reference::curand_philox_draw(
// philox_seed, n, 4 e, 0). Observations, next observations, rewards, dones, episode returns,
// starts and the per-env completed-episode sums must be bit-identical (tolerance 0: the kernel
// follows the reference's float order). A CUDA-graph-captured step, replayed with fresh
// actions, must equal eager steps bit for bit, episode boundaries included.
// The config checks run without a GPU (they throw before any CUDA call).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/core/error.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/env/market_series.h"
#include "lib/env/trading_env.h"
#include "tests/reference/philox_reference.h"
#include "tests/reference/trading_reference.h"
#include "tests/support/gpu.h"
#include "tests/support/param_name.h"

namespace {

using namespace resident;

constexpr std::size_t kWindow = 5;
constexpr std::size_t kEpisodeLength = 16;
constexpr float kCost = 0.0007f;

struct Market {
  MarketSeries series;
  std::vector<float> normalized;
};

Market small_market() {
  SyntheticMarketConfig config;
  config.seed = 7;
  config.steps = 300;
  config.noise_feature_count = 2;  // F = 4
  Market market{make_synthetic_market(config).series, {}};
  FeatureNormalizationOptions options;
  options.rolling_window = 64;
  market.normalized = normalize_features(market.series, options);
  return market;
}

// First index where the two arrays differ bitwise, or -1.
template <class T>
long first_bit_difference(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) return static_cast<long>(i);
  return -1;
}

#define EXPECT_BITWISE_EQ(got, want, what, step)                                              \
  do {                                                                                       \
    const long at_ = first_bit_difference(got, want);                                        \
    EXPECT_EQ(at_, -1) << what << " differs at step " << step << ", index " << at_;           \
  } while (0)

std::uint32_t start_draw(std::uint64_t seed, std::size_t env, std::uint32_t episode) {
  return reference::curand_philox_draw(seed, env, std::uint64_t{4} * episode, 0);
}

// Stream-ordered upload of one step's actions (a blocking pageable cudaMemcpy on the legacy
// stream is not ordered with the non-blocking stream the env runs on). The host vector must
// live until the stream is synchronized.
void copy_actions(DeviceBuffer<std::int32_t>& device, const std::vector<std::int32_t>& host,
                  cudaStream_t stream) {
  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(device.data(), host.data(), host.size() * sizeof(std::int32_t),
                                      cudaMemcpyHostToDevice, stream));
}

class TradingEnvTest : public ::testing::TestWithParam<std::size_t> {};

TEST_P(TradingEnvTest, StepsMatchTheReferenceBitForBit) {
  RESIDENT_REQUIRE_GPU();
  const std::size_t n = GetParam();
  const Market market = small_market();
  const std::size_t features = market.series.feature_count;
  Stream stream;
  TradingEnvConfig config{n, kWindow, kEpisodeLength, kCost, 1234 + n, 3};
  TradingEnv env(market.series, market.normalized, config, stream.get());
  const reference::TradingReference ref(
      {market.normalized, market.series.next_returns, features},
      {kWindow, kEpisodeLength, kCost});
  const std::size_t size = ref.observation_size();
  ASSERT_EQ(env.observation_size(), size);
  const std::uint64_t seed = env.philox_seed();

  std::vector<std::uint32_t> draws(n);
  std::vector<std::uint32_t> episode(n, 0);
  for (std::size_t e = 0; e < n; ++e) draws[e] = start_draw(seed, e, 0);
  reference::TradingBatchState state = ref.reset(draws);
  std::vector<float> want_obs(n * size);
  ref.observe(state, want_obs);
  stream.synchronize();
  const auto download = [&](const auto* device, std::size_t count) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(device)>>;
    std::vector<T> host(count);
    RESIDENT_CUDA_CHECK(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  };
  EXPECT_BITWISE_EQ(download(env.observations(), n * size), want_obs, "reset observations", 0);

  std::mt19937_64 rng(99 + n);
  std::uniform_int_distribution<std::int32_t> action(0, 2);
  DeviceBuffer<std::int32_t> d_actions(n);
  std::vector<float> completed_sum(n, 0.0f);
  std::vector<std::uint32_t> completed(n, 0);
  const std::size_t total_steps = 4 * kEpisodeLength + 3;
  std::size_t episodes_ended = 0;
  for (std::size_t step = 1; step <= total_steps; ++step) {
    std::vector<std::int32_t> actions(n);
    for (auto& a : actions) a = action(rng);
    copy_actions(d_actions, actions, stream.get());
    env.step(d_actions.data(), stream.get());
    for (std::size_t e = 0; e < n; ++e) draws[e] = start_draw(seed, e, episode[e] + 1);
    const reference::TradingBatchStep out = ref.step(state, actions, draws);
    ref.observe(state, want_obs);
    std::vector<float> want_next = want_obs;
    std::vector<std::uint8_t> want_dones(n);
    for (std::size_t e = 0; e < n; ++e) {
      want_dones[e] = out.truncated[e];
      if (!out.truncated[e]) continue;
      ++episode[e];
      ++completed[e];
      ++episodes_ended;
      completed_sum[e] += out.episode_returns[e];
      std::copy_n(&out.final_observations[e * size], size, &want_next[e * size]);
    }
    stream.synchronize();
    EXPECT_BITWISE_EQ(download(env.rewards(), n), out.rewards, "rewards", step);
    EXPECT_BITWISE_EQ(download(env.dones(), n), want_dones, "dones", step);
    EXPECT_BITWISE_EQ(download(env.episode_returns(), n), out.episode_returns, "episode returns",
                      step);
    EXPECT_BITWISE_EQ(download(env.next_observations(), n * size), want_next, "next observations",
                      step);
    EXPECT_BITWISE_EQ(download(env.observations(), n * size), want_obs, "observations", step);
    const TradingEnvStateView view = env.state();
    EXPECT_BITWISE_EQ(download(view.start, n), state.start, "starts", step);
    EXPECT_BITWISE_EQ(download(view.position, n), state.position, "positions", step);
    EXPECT_BITWISE_EQ(download(view.episode_return, n), state.episode_return, "returns", step);
    EXPECT_BITWISE_EQ(download(view.episode, n), episode, "episode counters", step);
    if (HasFailure()) break;
  }
  const TradingEnvStateView view = env.state();
  EXPECT_BITWISE_EQ(download(view.completed_return_sum, n), completed_sum, "completed sums", 0);
  EXPECT_BITWISE_EQ(download(view.completed_episodes, n), completed, "completed counts", 0);
  EXPECT_EQ(download(env.invalid_actions(), 1)[0], 0u);
  std::printf("  N %zu: %zu steps, %zu episodes ended, all outputs bit-identical\n", n,
              total_steps, episodes_ended);
}

INSTANTIATE_TEST_SUITE_P(EnvCounts, TradingEnvTest, ::testing::Values(1, 7, 1024),
                         [](const auto& test_case) {
                           return test::param_name("envs", test_case.param);
                         });

TEST(TradingEnvGraphTest, CapturedStepReplaysEqualToEager) {
  RESIDENT_REQUIRE_GPU();
  const std::size_t n = 300;
  const Market market = small_market();
  const std::size_t size = kWindow * market.series.feature_count + 1;
  Stream eager_stream, graph_stream;
  const TradingEnvConfig config{n, kWindow, kEpisodeLength, kCost, 42, 0};
  TradingEnv eager(market.series, market.normalized, config, eager_stream.get());
  TradingEnv graphed(market.series, market.normalized, config, graph_stream.get());
  DeviceBuffer<std::int32_t> eager_actions(n), graph_actions(n);
  eager_stream.synchronize();
  graph_stream.synchronize();

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(graph_stream.get(), cudaStreamCaptureModeGlobal), cudaSuccess);
  graphed.step(graph_actions.data(), graph_stream.get());
  ASSERT_EQ(cudaStreamEndCapture(graph_stream.get(), &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  std::mt19937_64 rng(5);
  std::uniform_int_distribution<std::int32_t> action(0, 2);
  const auto host = [](const auto* device, std::size_t count) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(device)>>;
    std::vector<T> values(count);
    RESIDENT_CUDA_CHECK(cudaMemcpy(values.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
    return values;
  };
  const std::size_t total_steps = 3 * kEpisodeLength + 1;
  for (std::size_t step = 1; step <= total_steps; ++step) {
    std::vector<std::int32_t> actions(n);
    for (auto& a : actions) a = action(rng);
    copy_actions(eager_actions, actions, eager_stream.get());
    copy_actions(graph_actions, actions, graph_stream.get());
    eager.step(eager_actions.data(), eager_stream.get());
    ASSERT_EQ(cudaGraphLaunch(exec, graph_stream.get()), cudaSuccess);
    eager_stream.synchronize();
    graph_stream.synchronize();
    EXPECT_BITWISE_EQ(host(graphed.rewards(), n), host(eager.rewards(), n), "rewards", step);
    EXPECT_BITWISE_EQ(host(graphed.dones(), n), host(eager.dones(), n), "dones", step);
    EXPECT_BITWISE_EQ(host(graphed.observations(), n * size), host(eager.observations(), n * size),
                      "observations", step);
    EXPECT_BITWISE_EQ(host(graphed.next_observations(), n * size),
                      host(eager.next_observations(), n * size), "next observations", step);
    EXPECT_BITWISE_EQ(host(graphed.episode_returns(), n), host(eager.episode_returns(), n),
                      "episode returns", step);
    EXPECT_BITWISE_EQ(host(graphed.state().start, n), host(eager.state().start, n), "starts", step);
    if (HasFailure()) break;
  }
  EXPECT_EQ(host(graphed.state().episode, n), std::vector<std::uint32_t>(n, 3u));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST(TradingEnvActionTest, InvalidActionsAreCountedAndActFlat) {
  RESIDENT_REQUIRE_GPU();
  const std::size_t n = 7;
  const Market market = small_market();
  Stream stream;
  TradingEnv env(market.series, market.normalized, {n, kWindow, kEpisodeLength, kCost, 8, 0},
                 stream.get());
  const reference::TradingReference ref(
      {market.normalized, market.series.next_returns, market.series.feature_count},
      {kWindow, kEpisodeLength, kCost});
  std::vector<std::uint32_t> draws(n);
  for (std::size_t e = 0; e < n; ++e) draws[e] = start_draw(env.philox_seed(), e, 0);
  reference::TradingBatchState state = ref.reset(draws);
  const std::vector<std::int32_t> actions{0, 3, 2, -1, 1, 7, 2};
  const std::vector<std::int32_t> as_flat{0, 1, 2, 1, 1, 1, 2};
  DeviceBuffer<std::int32_t> d_actions(n);
  copy_actions(d_actions, actions, stream.get());
  env.step(d_actions.data(), stream.get());
  const reference::TradingBatchStep out = ref.step(state, as_flat, draws);
  stream.synchronize();
  std::vector<float> got(n);
  RESIDENT_CUDA_CHECK(cudaMemcpy(got.data(), env.rewards(), n * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_BITWISE_EQ(got, out.rewards, "rewards", 1);
  std::uint32_t invalid = 0;
  RESIDENT_CUDA_CHECK(cudaMemcpy(&invalid, env.invalid_actions(), sizeof invalid, cudaMemcpyDeviceToHost));
  EXPECT_EQ(invalid, 3u);
}

// CPU only: invalid configs throw before any CUDA call.
TEST(TradingEnvConfigTest, InvalidConfigsThrowNamingTheValue) {
  const Market market = small_market();
  const auto rejects = [&](TradingEnvConfig config, std::span<const float> features,
                           const std::string& needle) {
    try {
      TradingEnv env(market.series, features, config, nullptr);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
    }
  };
  const TradingEnvConfig good{4, kWindow, kEpisodeLength, kCost, 0, 0};
  TradingEnvConfig c = good;
  c.env_count = 0;
  rejects(c, market.normalized, "env_count = 0");
  c = good;
  c.window = 0;
  rejects(c, market.normalized, "window = 0");
  c = good;
  c.episode_length = 0;
  rejects(c, market.normalized, "episode_length = 0");
  c = good;
  c.window = 200;
  c.episode_length = 101;
  rejects(c, market.normalized, "need >= window + episode_length = 301");
  c = good;
  c.cost_per_unit = -1.0f;
  rejects(c, market.normalized, "cost_per_unit");
  c = good;
  c.cost_per_unit = std::numeric_limits<float>::infinity();
  rejects(c, market.normalized, "cost_per_unit");
  rejects(good, std::span<const float>(market.normalized).first(10), "normalized feature values");
  std::vector<float> with_nan = market.normalized;
  with_nan[17] = std::numeric_limits<float>::quiet_NaN();
  rejects(good, with_nan, "not finite");
}

}  // namespace
