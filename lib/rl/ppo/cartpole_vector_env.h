// CartPoleVectorEnv: N CartPole-v1 environments (lib/env's CartPoleEnv) behind the VectorEnv
// interface of lib/env (PpoTrainer's env). A thin adapter: stepping, reset, the Philox streams, episode
// statistics and the checkpoint state are CartPoleEnv's; its output buffers are the step outputs
// the trainer reads (same [N] / [N, 4] layouts, so no copy per step: a step is CartPoleEnv's two
// launches). Episodes end by termination (pole or cart out of bounds) or truncation at step 500,
// flagged separately; every env auto-resets.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lib/env/cartpole_env.h"
#include "lib/env/vector_env.h"

namespace resident::ppo {

class CartPoleVectorEnv final : public VectorEnv {
 public:
  static constexpr std::uint64_t kDefaultStreamId = env::CartPoleEnv::kDefaultStreamId;

  // Throws resident::Error for env_count 0. Allocates; reset() initializes.
  explicit CartPoleVectorEnv(std::size_t env_count, std::uint64_t stream_id = kDefaultStreamId);

  std::size_t env_count() const override { return cartpole_.env_count(); }
  std::size_t observation_size() const override { return env::CartPoleEnv::kObservationSize; }
  std::size_t action_count() const override { return env::CartPoleEnv::kActionCount; }

  void reset(std::uint64_t seed, cudaStream_t stream) override;
  void step(const std::int32_t* actions, cudaStream_t stream) override;
  const float* observations() const override { return cartpole_.observations(); }
  VectorEnvStep step_outputs() const override;
  void collect_episode_stats(cudaStream_t stream) override;
  const double* episode_return_sum() const override { return cartpole_.episode_return_sum(); }
  const unsigned long long* episode_count() const override { return cartpole_.episode_count(); }

  // Layout: u64 magic, u64 env count, then CartPoleEnv::save_state's bytes.
  std::vector<std::byte> save_state(cudaStream_t stream) const override;
  void check_state(std::span<const std::byte> state) const override;
  void load_state(std::span<const std::byte> state, cudaStream_t stream) override;

  const env::CartPoleEnv& cartpole() const noexcept { return cartpole_; }

 private:
  env::CartPoleEnv cartpole_;
};

}  // namespace resident::ppo
