// VectorEnv: N environments stepped on the device, as the trainers see them (PpoTrainer takes
// one; DqnTrainer steps its DqnEnv through it). step() and collect_episode_stats() only enqueue
// kernels (capturable); the state save/load calls are the checkpoint phase (blocking).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace resident {

// What the last step of the N envs produced: device arrays [N] or [N, D] row-major at fixed
// addresses (valid for the env's lifetime).
struct VectorEnvStep {
  const float* rewards = nullptr;
  const std::uint8_t* terminated = nullptr;   // 0/1; null: the env never terminates
  const std::uint8_t* truncated = nullptr;    // 0/1
  const float* final_observations = nullptr;  // s' of the envs whose episode ended (others: any)
  const float* observations = nullptr;        // what the policy acts on next (after auto-reset)
};

class VectorEnv {
 public:
  virtual ~VectorEnv() = default;

  virtual std::size_t env_count() const = 0;
  virtual std::size_t observation_size() const = 0;
  virtual std::size_t action_count() const = 0;

  // Setup: every env back to a fresh episode from `seed`; statistics cleared.
  virtual void reset(std::uint64_t seed, cudaStream_t stream) = 0;
  // Hot path: actions [N] int32 on the device.
  virtual void step(const std::int32_t* actions, cudaStream_t stream) = 0;
  // [N, D]: what the policy acts on next (after auto-reset); a fixed device address.
  virtual const float* observations() const = 0;
  // The last step's outputs (fixed device addresses).
  virtual VectorEnvStep step_outputs() const = 0;
  // Hot path: episode_return_sum() / episode_count() = returns and count of the episodes ended
  // since the previous call. An env that keeps no episode statistics throws resident::Error.
  virtual void collect_episode_stats(cudaStream_t stream) = 0;
  virtual const double* episode_return_sum() const = 0;
  virtual const unsigned long long* episode_count() const = 0;

  // Checkpoint phase: the whole state as bytes, and back. check_state throws resident::Error
  // when the bytes cannot be this env's state (load_state calls it before changing anything).
  virtual std::vector<std::byte> save_state(cudaStream_t stream) const = 0;
  virtual void check_state(std::span<const std::byte> state) const = 0;
  virtual void load_state(std::span<const std::byte> state, cudaStream_t stream) = 0;
};

}  // namespace resident
