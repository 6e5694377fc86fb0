// Vectorized CartPole-v1 on the GPU (kernels/env/cartpole_step.cu): N environments in one
// launch, one thread per environment, with auto-reset from per-env Philox streams. The
// dynamics follow tests/reference/cartpole_reference.h operation by operation in float (no
// FMA contraction; sin/cos in double rounded to float), so the GPU matches the CPU reference
// bit for bit.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels {

inline constexpr std::size_t kCartPoleObservationSize = 4;  // x, x_dot, theta, theta_dot
inline constexpr std::int32_t kCartPoleMaxEpisodeSteps = 500;

// Device state of N environments, struct of arrays, [N] each unless noted.
struct CartPoleDeviceState {
  float* x = nullptr;
  float* x_dot = nullptr;
  float* theta = nullptr;
  float* theta_dot = nullptr;
  std::int32_t* elapsed_steps = nullptr;      // steps of the current episode so far
  float* episode_return = nullptr;            // rewards of the current episode so far
  float* completed_return_sum = nullptr;      // returns of episodes ended since last cleared
  std::uint32_t* completed_episodes = nullptr;  // episodes ended since last cleared
  std::uint64_t* philox_block = nullptr;      // [1] Philox counter block of the next draws
  std::uint32_t* step_ticket = nullptr;       // [1] 0 between steps (the last block's ticket)
};

// Outputs of one step, all overwritten.
struct CartPoleStepOutputs {
  float* observations = nullptr;        // [N, 4] the state after the step and any auto-reset
  float* rewards = nullptr;             // [N] 1
  std::uint8_t* terminated = nullptr;   // [N] 0/1
  std::uint8_t* truncated = nullptr;    // [N] 0/1
  float* final_observations = nullptr;  // [N, 4] optional (nullptr skips): the state the step
                                        // reached where the episode ended, NaN elsewhere
};

// Resets all N environments: env n draws four 32-bit values from cuRAND Philox
// (seed = philox_seed, subsequence = n, offset = 0) and sets its state to
// -0.05f + 0.1f * float(d >> 8) * 2^-24 per component; elapsed_steps, episode_return and the
// completed-episode accumulators are zeroed, *philox_block = 1, *step_ticket = 0, observations
// [N, 4] overwritten.
void launch_cartpole_reset(float* observations, CartPoleDeviceState state, std::size_t env_count,
                           std::uint64_t philox_seed, cudaStream_t stream);

// One step of N environments. actions [N] int32: 1 pushes right, anything else left (callers
// pass 0 or 1). An env whose episode ends (terminated: out of the 2.4 / 12 degree bounds;
// truncated: its 500th step) adds its return to completed_return_sum, counts one in
// completed_episodes and resets from the four Philox draws at (philox_seed, subsequence n,
// offset 4 * *philox_block). After the step *philox_block += 1, done by the block that finishes
// last (each block takes a ticket from *step_ticket with atomicInc, which wraps it back to 0 for
// the next step; *step_ticket must be 0 before the first step), so the step reads its offset
// from device memory and a captured graph replays with fresh draws, in one launch.
// Deterministic (the ticket only picks which block writes the same value); no allocation, no
// host sync.
void launch_cartpole_step(CartPoleStepOutputs outputs, CartPoleDeviceState state,
                          const std::int32_t* actions, std::size_t env_count,
                          std::uint64_t philox_seed, cudaStream_t stream);

}  // namespace resident::kernels
