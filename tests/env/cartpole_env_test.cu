// The GPU CartPole environment against the CPU reference batch (tests/reference/
// cartpole_reference.h), step by step and bit for bit: the reset state from the same cuRAND
// Philox draws (tests/reference/philox_reference.h), then 1000 steps with actions that mix
// random pushes (even envs: short episodes, many terminations) and a PD controller (odd envs:
// episodes reach the 500-step truncation), at N = 1, 33, 4096. Observations (after
// auto-reset), rewards, terminated, truncated and final observations must be identical bits;
// the completed-episode statistics exact (returns are integers). A CUDA graph of one step,
// replayed, must equal eager stepping.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/core/philox.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/env/cartpole_env.h"
#include "tests/reference/cartpole_reference.h"
#include "tests/reference/philox_reference.h"
#include "tests/support/bitwise.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident;
using env::CartPoleEnv;
using reference::CartPoleBatchState;
using reference::CartPoleBatchStep;

constexpr std::uint64_t kSeed = 20240607;
constexpr int kSteps = 1000;

// The reset draws of every env for Philox block `block` (offset 4 * block) of the env's stream.
std::vector<std::uint32_t> philox_reset_draws(std::uint64_t philox_seed, std::size_t env_count,
                                              std::uint64_t block) {
  std::vector<std::uint32_t> draws(4 * env_count);
  for (std::size_t n = 0; n < env_count; ++n)
    for (std::uint64_t k = 0; k < 4; ++k)
      draws[4 * n + k] = reference::curand_philox_draw(philox_seed, n, 4 * block, k);
  return draws;
}

// Even envs push at random; odd envs run a PD controller that balances the pole for 500 steps.
std::vector<std::int32_t> next_actions(const CartPoleBatchState& state, std::mt19937& rng) {
  std::vector<std::int32_t> actions(state.env_count());
  for (std::size_t n = 0; n < actions.size(); ++n) {
    const std::int32_t random_push = static_cast<std::int32_t>(rng() & 1u);
    const float pd = 10.0f * state.theta[n] + state.theta_dot[n] + 0.1f * state.x[n] +
                     0.3f * state.x_dot[n];
    actions[n] = n % 2 == 0 ? random_push : (pd > 0.0f ? 1 : 0);
  }
  return actions;
}

using test::download;
using test::same_bits;

std::vector<float> reference_observations(const CartPoleBatchState& state) {
  std::vector<float> obs(4 * state.env_count());
  reference::cartpole_batch_observe(state, obs);
  return obs;
}

class CartPoleEnvTest : public ::testing::TestWithParam<std::size_t> {};

TEST_P(CartPoleEnvTest, MatchesTheReferenceBitForBit) {
  RESIDENT_REQUIRE_GPU();
  const std::size_t n_envs = GetParam();
  Stream stream;
  CartPoleEnv env(n_envs);
  env.reset(kSeed, stream.get());
  stream.synchronize();
  EXPECT_EQ(env.philox_seed(), mix_seed(kSeed, CartPoleEnv::kDefaultStreamId));

  CartPoleBatchState ref = reference::cartpole_batch_reset(
      philox_reset_draws(env.philox_seed(), n_envs, 0));
  ASSERT_TRUE(same_bits(download(env.observations(), 4 * n_envs), reference_observations(ref),
                        "reset observations"));

  std::mt19937 rng(static_cast<unsigned>(n_envs));
  DeviceBuffer<std::int32_t> d_actions(n_envs);
  std::size_t terminations = 0, truncations = 0;
  double ref_return_sum = 0.0;
  unsigned long long ref_episodes = 0;
  for (int t = 1; t <= kSteps; ++t) {
    const std::vector<std::int32_t> actions = next_actions(ref, rng);
    d_actions.upload(actions);
    env.step(d_actions.data(), stream.get());
    stream.synchronize();
    const CartPoleBatchStep out = reference::cartpole_batch_step(
        ref, actions, philox_reset_draws(env.philox_seed(), n_envs, static_cast<std::uint64_t>(t)));
    const std::string at = " at step " + std::to_string(t);
    ASSERT_TRUE(same_bits(download(env.observations(), 4 * n_envs), reference_observations(ref),
                          "observations" + at));
    ASSERT_TRUE(same_bits(download(env.rewards(), n_envs), out.rewards, "rewards" + at));
    ASSERT_TRUE(same_bits(download(env.terminated(), n_envs), out.terminated, "terminated" + at));
    ASSERT_TRUE(same_bits(download(env.truncated(), n_envs), out.truncated, "truncated" + at));
    ASSERT_TRUE(same_bits(download(env.final_observations(), 4 * n_envs), out.final_observations,
                          "final observations" + at));
    for (std::size_t n = 0; n < n_envs; ++n) {
      terminations += out.terminated[n];
      truncations += out.truncated[n];
      if (out.terminated[n] || out.truncated[n]) {
        ref_return_sum += static_cast<double>(out.episode_returns[n]);
        ++ref_episodes;
      }
    }
  }
  std::printf("  N %zu: %zu terminations, %zu truncations in %d steps\n", n_envs, terminations,
              truncations, kSteps);
  EXPECT_GT(terminations, 0u) << "no auto-reset after a termination happened";
  if (n_envs > 1) EXPECT_GT(truncations, 0u) << "no truncation at 500 steps happened";

  std::uint64_t block = 0;
  ASSERT_EQ(cudaMemcpy(&block, env.philox_block(), sizeof block, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(block, static_cast<std::uint64_t>(kSteps) + 1);

  env.collect_episode_stats(stream.get(), /*clear=*/true);
  stream.synchronize();
  EXPECT_EQ(download(env.episode_return_sum(), 1)[0], ref_return_sum);
  EXPECT_EQ(download(env.episode_count(), 1)[0], ref_episodes);
  env.collect_episode_stats(stream.get(), /*clear=*/true);  // cleared: nothing left
  stream.synchronize();
  EXPECT_EQ(download(env.episode_return_sum(), 1)[0], 0.0);
  EXPECT_EQ(download(env.episode_count(), 1)[0], 0u);
}

INSTANTIATE_TEST_SUITE_P(EnvCounts, CartPoleEnvTest, ::testing::Values(1, 33, 4096),
                         [](const auto& info) { return "N" + std::to_string(info.param); });

// One step captured into a CUDA graph and replayed 600 times (past a truncation) equals eager
// stepping of a second env with the same seed and actions, output for output.
TEST(CartPoleEnvGraphTest, GraphReplayEqualsEager) {
  RESIDENT_REQUIRE_GPU();
  constexpr std::size_t kEnvs = 257;
  Stream eager_stream, graph_stream;
  CartPoleEnv eager(kEnvs), graphed(kEnvs);
  eager.reset(kSeed, eager_stream.get());
  graphed.reset(kSeed, graph_stream.get());
  eager_stream.synchronize();
  graph_stream.synchronize();
  DeviceBuffer<std::int32_t> d_actions(kEnvs);

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(graph_stream.get(), cudaStreamCaptureModeGlobal), cudaSuccess);
  graphed.step(d_actions.data(), graph_stream.get());
  ASSERT_EQ(cudaStreamEndCapture(graph_stream.get(), &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  CartPoleBatchState policy_state = reference::cartpole_batch_reset(
      philox_reset_draws(eager.philox_seed(), kEnvs, 0));  // drives the PD controller
  std::mt19937 rng(11);
  std::size_t truncations = 0;
  for (int t = 1; t <= 600; ++t) {
    const std::vector<std::int32_t> actions = next_actions(policy_state, rng);
    d_actions.upload(actions);
    eager.step(d_actions.data(), eager_stream.get());
    ASSERT_EQ(cudaGraphLaunch(exec, graph_stream.get()), cudaSuccess);
    eager_stream.synchronize();
    graph_stream.synchronize();
    reference::cartpole_batch_step(
        policy_state, actions, philox_reset_draws(eager.philox_seed(), kEnvs, static_cast<std::uint64_t>(t)));
    const std::string at = " at step " + std::to_string(t);
    ASSERT_TRUE(same_bits(download(graphed.observations(), 4 * kEnvs),
                          download(eager.observations(), 4 * kEnvs), "observations" + at));
    ASSERT_TRUE(same_bits(download(graphed.final_observations(), 4 * kEnvs),
                          download(eager.final_observations(), 4 * kEnvs), "final observations" + at));
    ASSERT_TRUE(same_bits(download(graphed.rewards(), kEnvs), download(eager.rewards(), kEnvs),
                          "rewards" + at));
    ASSERT_TRUE(same_bits(download(graphed.terminated(), kEnvs), download(eager.terminated(), kEnvs),
                          "terminated" + at));
    const std::vector<std::uint8_t> truncated = download(graphed.truncated(), kEnvs);
    ASSERT_TRUE(same_bits(truncated, download(eager.truncated(), kEnvs), "truncated" + at));
    for (const std::uint8_t flag : truncated) truncations += flag;
  }
  EXPECT_GT(truncations, 0u);
  eager.collect_episode_stats(eager_stream.get());
  graphed.collect_episode_stats(graph_stream.get());
  eager_stream.synchronize();
  graph_stream.synchronize();
  EXPECT_EQ(download(graphed.episode_return_sum(), 1), download(eager.episode_return_sum(), 1));
  EXPECT_EQ(download(graphed.episode_count(), 1), download(eager.episode_count(), 1));
  EXPECT_GT(download(eager.episode_count(), 1)[0], 0u);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
}

// save_state after 300 random-policy steps (episodes ended and auto-reset on the way), loaded
// into a fresh env of the same count that was reset with another seed: the next 300 steps of both
// are bit-identical (observations, rewards, flags, episode statistics). An env of another count
// rejects the state and keeps its own.
TEST(CartPoleEnvStateTest, SavedStateContinuesBitForBitInAFreshEnv) {
  RESIDENT_REQUIRE_GPU();
  constexpr std::size_t kEnvs = 65;
  Stream stream;
  CartPoleEnv source(kEnvs), fresh(kEnvs);
  source.reset(kSeed, stream.get());
  fresh.reset(kSeed + 1, stream.get());
  DeviceBuffer<std::int32_t> d_actions(kEnvs);
  std::mt19937 rng(5);
  std::uniform_int_distribution<std::int32_t> coin(0, 1);
  const auto random_actions = [&] {
    std::vector<std::int32_t> a(kEnvs);
    for (auto& x : a) x = coin(rng);
    d_actions.upload(a);
  };
  for (int t = 0; t < 300; ++t) {
    random_actions();
    source.step(d_actions.data(), stream.get());
  }
  stream.synchronize();
  const std::vector<std::uint8_t> state = source.save_state();
  fresh.load_state(state);
  EXPECT_EQ(fresh.philox_seed(), source.philox_seed());
  for (int t = 0; t < 300; ++t) {
    random_actions();
    source.step(d_actions.data(), stream.get());
    fresh.step(d_actions.data(), stream.get());
    stream.synchronize();
    const std::string at = " at step " + std::to_string(t);
    ASSERT_TRUE(same_bits(download(fresh.observations(), 4 * kEnvs),
                          download(source.observations(), 4 * kEnvs), "observations" + at));
    ASSERT_TRUE(same_bits(download(fresh.rewards(), kEnvs), download(source.rewards(), kEnvs),
                          "rewards" + at));
    ASSERT_TRUE(same_bits(download(fresh.terminated(), kEnvs), download(source.terminated(), kEnvs),
                          "terminated" + at));
  }
  source.collect_episode_stats(stream.get());
  fresh.collect_episode_stats(stream.get());
  stream.synchronize();
  EXPECT_EQ(download(fresh.episode_return_sum(), 1), download(source.episode_return_sum(), 1));
  EXPECT_EQ(download(fresh.episode_count(), 1), download(source.episode_count(), 1));
  EXPECT_GT(download(source.episode_count(), 1)[0], 0u);

  CartPoleEnv other(kEnvs + 1);
  other.reset(kSeed, stream.get());
  stream.synchronize();
  const std::vector<std::uint8_t> before = other.save_state();
  EXPECT_THROW(other.load_state(state), resident::Error);
  EXPECT_EQ(other.save_state(), before) << "a rejected state changed the env";
}

// CPU side: a zero-sized env is refused before anything is allocated.
TEST(CartPoleEnvConstructionTest, ZeroEnvsThrow) {
  EXPECT_THROW(CartPoleEnv(0), resident::Error);
}

}  // namespace
