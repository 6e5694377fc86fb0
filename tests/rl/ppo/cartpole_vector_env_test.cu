// PPO's CartPole env (lib/rl/ppo/cartpole_vector_env.h), an adapter over lib/env's CartPoleEnv.
// CPU (run anywhere): zero envs are refused before anything touches the device.
// GPU: after reset the step outputs read "no step yet" (rewards 0, flags 0, final observations
// NaN); 1000 steps (even envs push at random: terminations; odd envs run a PD controller that
// balances the pole: truncations at step 500) give bit for bit the outputs and episode
// statistics of a bare CartPoleEnv with the same seed, at fixed device addresses; a state saved
// at step 600 and loaded into an env reset with another seed replays steps 601..1000 bit for
// bit; states of another env count, a truncated state and a bad magic are refused and change
// nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/env/cartpole_env.h"
#include "lib/env/vector_env.h"
#include "lib/rl/ppo/cartpole_vector_env.h"
#include "tests/support/bitwise.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident;
using resident::ppo::CartPoleVectorEnv;

constexpr std::uint64_t kSeed = 20240607;
constexpr std::size_t kEnvs = 33;
constexpr int kSteps = 1000, kSaveAt = 600;

using test::download;
using test::same_bits;

// One step's outputs on the host.
struct Outputs {
  std::vector<float> observations, rewards, final_observations;
  std::vector<std::uint8_t> terminated, truncated;
};

Outputs fetch(const VectorEnvStep& o) {
  return {download(o.observations, 4 * kEnvs), download(o.rewards, kEnvs),
          download(o.final_observations, 4 * kEnvs), download(o.terminated, kEnvs),
          download(o.truncated, kEnvs)};
}

::testing::AssertionResult same_outputs(const Outputs& a, const Outputs& b, const std::string& at) {
  for (auto r : {same_bits(a.observations, b.observations, "observations" + at),
                 same_bits(a.rewards, b.rewards, "rewards" + at),
                 same_bits(a.final_observations, b.final_observations, "final observations" + at),
                 same_bits(a.terminated, b.terminated, "terminated" + at),
                 same_bits(a.truncated, b.truncated, "truncated" + at)})
    if (!r) return r;
  return ::testing::AssertionSuccess();
}

// Even envs push at random; odd envs run a PD controller on (x, x_dot, theta, theta_dot).
std::vector<std::int32_t> next_actions(const std::vector<float>& obs, std::mt19937& rng) {
  std::vector<std::int32_t> actions(kEnvs);
  for (std::size_t n = 0; n < kEnvs; ++n) {
    const float* s = &obs[4 * n];
    const float pd = 10.0f * s[2] + s[3] + 0.1f * s[0] + 0.3f * s[1];
    actions[n] = n % 2 == 0 ? static_cast<std::int32_t>(rng() & 1u) : (pd > 0.0f ? 1 : 0);
  }
  return actions;
}

TEST(CartPoleVectorEnvConstruction, ZeroEnvsThrowBeforeTouchingTheDevice) {
  EXPECT_THROW(CartPoleVectorEnv env(0), Error);  // no CUDA call: passes without a GPU too
}

TEST(CartPoleVectorEnv, IsTheBareEnvBitForBitAndResumesFromItsSavedState) {
  RESIDENT_REQUIRE_GPU();
  Stream stream;
  const cudaStream_t s = stream.get();
  CartPoleVectorEnv adapter(kEnvs);
  env::CartPoleEnv bare(kEnvs);
  EXPECT_EQ(adapter.env_count(), kEnvs);
  EXPECT_EQ(adapter.observation_size(), 4u);
  EXPECT_EQ(adapter.action_count(), 2u);
  adapter.reset(kSeed, s);
  bare.reset(kSeed, s);
  stream.synchronize();
  const VectorEnvStep out = adapter.step_outputs();
  const VectorEnvStep bare_out{bare.rewards(), bare.terminated(), bare.truncated(),
                               bare.final_observations(), bare.observations()};
  EXPECT_EQ(out.observations, adapter.observations());
  {
    const Outputs first = fetch(out);
    EXPECT_TRUE(same_bits(first.observations, download(bare.observations(), 4 * kEnvs),
                          "reset observations"));
    for (std::size_t n = 0; n < kEnvs; ++n) {
      EXPECT_EQ(first.rewards[n], 0.0f) << n;
      EXPECT_EQ(first.terminated[n], 0) << n;
      EXPECT_EQ(first.truncated[n], 0) << n;
    }
    for (const float f : first.final_observations) EXPECT_TRUE(std::isnan(f));
  }

  std::mt19937 rng(5);
  DeviceBuffer<std::int32_t> d_actions(kEnvs);
  std::vector<std::vector<std::int32_t>> tail_actions;
  std::vector<Outputs> tail_outputs;
  std::vector<std::byte> saved;
  std::size_t terminations = 0, truncations = 0;
  for (int t = 1; t <= kSteps; ++t) {
    const std::vector<std::int32_t> actions =
        next_actions(download(adapter.observations(), 4 * kEnvs), rng);
    d_actions.upload(actions);
    adapter.step(d_actions.data(), s);
    bare.step(d_actions.data(), s);
    stream.synchronize();
    const Outputs got = fetch(adapter.step_outputs());
    ASSERT_TRUE(same_outputs(got, fetch(bare_out), " at step " + std::to_string(t)));
    for (std::size_t n = 0; n < kEnvs; ++n) {
      terminations += got.terminated[n];
      truncations += got.truncated[n];
    }
    if (t > kSaveAt) {
      tail_actions.push_back(actions);
      tail_outputs.push_back(got);
    }
    if (t == kSaveAt) saved = adapter.save_state(s);
  }
  std::printf("  %zu envs: %zu terminations, %zu truncations in %d steps\n", kEnvs, terminations,
              truncations, kSteps);
  EXPECT_GT(terminations, 0u);
  EXPECT_GT(truncations, 0u) << "no truncation at step 500";
  adapter.collect_episode_stats(s);
  bare.collect_episode_stats(s, /*clear=*/true);
  stream.synchronize();
  EXPECT_EQ(download(adapter.episode_return_sum(), 1), download(bare.episode_return_sum(), 1));
  EXPECT_EQ(download(adapter.episode_count(), 1), download(bare.episode_count(), 1));
  EXPECT_EQ(adapter.step_outputs().rewards, out.rewards) << "the device addresses moved";

  // Resume from step kSaveAt in an env reset with another seed.
  CartPoleVectorEnv resumed(kEnvs);
  resumed.reset(kSeed + 1, s);
  const float* const observations_address = resumed.observations();
  resumed.load_state(saved, s);
  EXPECT_EQ(resumed.observations(), observations_address) << "load_state moved the observations";
  for (std::size_t k = 0; k < tail_actions.size(); ++k) {
    d_actions.upload(tail_actions[k]);
    resumed.step(d_actions.data(), s);
    stream.synchronize();
    ASSERT_TRUE(same_outputs(fetch(resumed.step_outputs()), tail_outputs[k],
                             " at resumed step " + std::to_string(kSaveAt + 1 + k)));
  }
  resumed.collect_episode_stats(s);
  stream.synchronize();
  EXPECT_GT(download(resumed.episode_count(), 1)[0], 0u);

  // Refused states change nothing.
  const std::vector<std::byte> before = resumed.save_state(s);
  const std::vector<std::byte> truncated(saved.begin(), saved.end() - 1);
  std::vector<std::byte> bad_magic = saved;
  bad_magic[0] ^= std::byte{0x01};
  CartPoleVectorEnv other_count(kEnvs + 1);
  other_count.reset(kSeed, s);
  const std::vector<std::byte> foreign = other_count.save_state(s);
  const std::vector<std::byte>* const refused[] = {&truncated, &bad_magic, &foreign};
  for (const std::vector<std::byte>* state : refused)
    EXPECT_THROW(resumed.load_state(*state, s), Error);
  EXPECT_THROW(other_count.load_state(saved, s), Error);
  EXPECT_EQ(resumed.save_state(s), before) << "a refused state changed the env";
}

}  // namespace
