// CartPoleEnv: N CartPole-v1 environments resident on the GPU. Owns the device
// state (struct of arrays), the step outputs and the episode statistics; every allocation
// happens in the constructor. reset() is a setup call; step() and collect_episode_stats() only
// enqueue kernels on the given stream (no allocation, no copy, no sync), so a collection step
// can be captured into a CUDA graph and replayed: the auto-reset draws are keyed by a
// device-resident Philox block counter, so replays draw fresh values.
//
// Random stream: cuRAND Philox with seed mix_seed(seed, stream_id), subsequence = env id,
// offset 0 for reset() and 4 * k for the auto-resets of the k-th step after it (k = 1, 2, ...).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/env/cartpole_step.h"
#include "lib/core/device_buffer.h"
#include "lib/core/device_state_bytes.h"

namespace resident::env {

class CartPoleEnv {
 public:
  static constexpr std::size_t kObservationSize = 4;  // x, x_dot, theta, theta_dot
  static constexpr std::size_t kActionCount = 2;      // 0 pushes left, 1 right
  static constexpr std::uint64_t kDefaultStreamId = 0x43617274506f6c65ull;  // "CartPole"

  // Allocates the state of `env_count` (> 0) environments; nothing is initialized until
  // reset(). Throws resident::Error for env_count 0.
  explicit CartPoleEnv(std::size_t env_count, std::uint64_t stream_id = kDefaultStreamId);

  // Setup: every env gets a fresh state from the seed's Philox stream; episode counters and
  // statistics are cleared; observations() holds the first observations; the last step's outputs
  // read as "no step yet" (rewards 0, terminated/truncated 0, final observations NaN), so a state
  // saved right after reset() is defined bytes. Enqueued on `stream`.
  void reset(std::uint64_t seed, cudaStream_t stream);

  // Hot path: one step of every env with actions [N] int32 (0 or 1) in device memory. Writes
  // observations (after auto-reset), rewards, terminated, truncated, final_observations.
  void step(const std::int32_t* actions, cudaStream_t stream);

  // Hot path: episode_return_sum() / episode_count() = the returns and number of episodes
  // completed since the last clear (clear = true zeroes the per-env accumulators).
  void collect_episode_stats(cudaStream_t stream, bool clear = true);

  std::size_t env_count() const noexcept { return env_count_; }
  std::uint64_t philox_seed() const noexcept { return philox_seed_; }

  // Device views, valid for the lifetime of the env.
  const float* observations() const noexcept { return observations_.data(); }  // [N, 4]
  const float* rewards() const noexcept { return rewards_.data(); }            // [N]
  const std::uint8_t* terminated() const noexcept { return terminated_.data(); }  // [N] 0/1
  const std::uint8_t* truncated() const noexcept { return truncated_.data(); }    // [N] 0/1
  // [N, 4]: the state where the last step ended an episode, NaN for the other envs.
  const float* final_observations() const noexcept { return final_observations_.data(); }
  const double* episode_return_sum() const noexcept { return return_sum_.data(); }  // [1]
  const unsigned long long* episode_count() const noexcept { return episode_count_.data(); }  // [1]
  // Device-resident Philox block counter ([1]).
  std::uint64_t* philox_block() noexcept { return philox_block_.data(); }

  // Checkpoint phase (copies and synchronizes): everything the envs' future depends on (state,
  // counters, Philox block and seed, the last step's outputs, the episode accumulators) as bytes
  // (lib/core/device_state_bytes.h); load_state() restores it into envs of the same count, or
  // throws resident::Error naming the mismatch and changes nothing.
  std::vector<std::uint8_t> save_state() const;
  void load_state(std::span<const std::uint8_t> bytes) { stage_state(bytes).commit(); }
  // load_state in two steps: every check now, nothing applied until the reader's commit() (bytes
  // must outlive it).
  DeviceStateReader stage_state(std::span<const std::uint8_t> bytes);

 private:
  kernels::CartPoleDeviceState device_state() noexcept;

  std::size_t env_count_;
  std::uint64_t stream_id_;
  std::uint64_t philox_seed_ = 0;
  // State: x, x_dot, theta, theta_dot, episode_return, completed_return_sum in one slab [6N].
  DeviceBuffer<float> state_floats_;
  DeviceBuffer<std::int32_t> elapsed_steps_;
  DeviceBuffer<std::uint32_t> completed_episodes_;
  DeviceBuffer<std::uint64_t> philox_block_;
  DeviceBuffer<std::uint32_t> step_ticket_;  // 0 between steps; not part of the saved state
  DeviceBuffer<float> observations_;
  DeviceBuffer<float> rewards_;
  DeviceBuffer<std::uint8_t> terminated_;
  DeviceBuffer<std::uint8_t> truncated_;
  DeviceBuffer<float> final_observations_;
  DeviceBuffer<double> return_sum_;
  DeviceBuffer<unsigned long long> episode_count_;
};

}  // namespace resident::env
