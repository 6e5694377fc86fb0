// CartPoleVectorEnv: N CartPole-v1 environments for the PPO trainer, on the kernels of
// kernels/env (the dynamics, auto-reset and episode statistics of lib/env's CartPoleEnv, same
// Philox stream layout), owning its state so that a checkpoint can save and restore all of it
// (lib/env's CartPoleEnv keeps its state private).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/env/cartpole_step.h"
#include "lib/core/device_buffer.h"
#include "lib/rl/ppo/vector_env.h"

namespace resident::ppo {

class CartPoleVectorEnv final : public VectorEnv {
 public:
  static constexpr std::uint64_t kDefaultStreamId = 0x43617274506f6c65ull;  // "CartPole"

  // Throws resident::Error for env_count 0. Allocates; reset() initializes.
  explicit CartPoleVectorEnv(std::size_t env_count, std::uint64_t stream_id = kDefaultStreamId);

  std::size_t env_count() const override { return env_count_; }
  std::size_t observation_size() const override { return kernels::kCartPoleObservationSize; }
  std::size_t action_count() const override { return 2; }

  void reset(std::uint64_t seed, cudaStream_t stream) override;
  void step(const std::int32_t* actions, cudaStream_t stream) override;
  const float* observations() const override { return observations_.data(); }
  kernels::ppo::EnvStepOutputs step_outputs() const override;
  void collect_episode_stats(cudaStream_t stream) override;
  const double* episode_return_sum() const override { return return_sum_.data(); }
  const unsigned long long* episode_count() const override { return episode_count_.data(); }

  std::vector<std::byte> save_state(cudaStream_t stream) const override;
  void check_state(std::span<const std::byte> state) const override;
  void load_state(std::span<const std::byte> state, cudaStream_t stream) override;

 private:
  kernels::CartPoleDeviceState device_state() const noexcept;
  std::size_t state_bytes() const noexcept;

  std::size_t env_count_;
  std::uint64_t stream_id_;
  std::uint64_t philox_seed_ = 0;
  DeviceBuffer<float> state_floats_;  // x, x_dot, theta, theta_dot, episode_return, completed [6N]
  DeviceBuffer<std::int32_t> elapsed_steps_;
  DeviceBuffer<std::uint32_t> completed_episodes_;
  DeviceBuffer<std::uint64_t> philox_block_;
  DeviceBuffer<float> observations_, rewards_, final_observations_;
  DeviceBuffer<std::uint8_t> terminated_, truncated_;
  DeviceBuffer<double> return_sum_;
  DeviceBuffer<unsigned long long> episode_count_;
};

}  // namespace resident::ppo
