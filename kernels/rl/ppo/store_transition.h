// The environment half of a rollout step: stores the step's outcome at row t of the rollout
// (kernels/rl/ppo/store_transition.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::ppo {

// Rollout arrays written by a step, time-major: (t, n) at t * N + n.
struct TransitionStore {
  float* rewards = nullptr;             // [T, N]
  std::uint8_t* terminated = nullptr;   // [T, N]
  std::uint8_t* truncated = nullptr;    // [T, N]
  float* final_observations = nullptr;  // [T, N, D]
  float* observations = nullptr;        // [T + 1, N, D]: the step writes row t + 1
};

// What the environment step produced, [N] or [N, D].
struct EnvStepOutputs {
  const float* rewards = nullptr;
  const std::uint8_t* terminated = nullptr;
  const std::uint8_t* truncated = nullptr;
  const float* final_observations = nullptr;  // NaN where the episode did not end
  const float* observations = nullptr;        // after auto-reset
};

// With t = *step_slot % T: copies the step outputs into row t (row t + 1 of observations), then
// *counter = *step_slot + 1 (written by one thread; no thread of this kernel reads the counter).
// One thread per (env, component); overwrite; deterministic; capturable.
void launch_store_transition(TransitionStore store, EnvStepOutputs step, std::size_t env_count,
                             std::size_t observation_size, std::size_t steps,
                             const std::uint64_t* step_slot, std::uint64_t* counter,
                             cudaStream_t stream);

}  // namespace resident::kernels::ppo
