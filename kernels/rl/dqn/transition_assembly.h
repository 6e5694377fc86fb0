// Transitions of one vector-env step in the replay's DeviceTransitions layout
// (kernels/rl/dqn/transition_assembly.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::dqn {

// What the env wrote in its step, [N] or [N, D] row-major.
struct TransitionSources {
  const float* observations = nullptr;        // [N, D] after the step and any auto-reset
  const float* next_observations = nullptr;   // [N, D] s' where the episode did not end
  const float* final_observations = nullptr;  // [N, D] s' where it ended; null: next_observations
  const std::uint8_t* terminated = nullptr;   // [N] 0/1; null: never terminal
  const std::uint8_t* truncated = nullptr;    // [N] 0/1; null: never truncated
};

struct TransitionOutputs {
  float* states = nullptr;                // [N, D] overwritten with current_observations (s)
  float* next_states = nullptr;           // [N, D] overwritten (s')
  std::uint8_t* dones = nullptr;          // [N] overwritten: terminated only
  float* current_observations = nullptr;  // [N, D] in: s (before the step); out: observations
};

// For every env n and feature d:
//   states[n, d]      = current_observations[n, d]
//   next_states[n, d] = ended_n && final_observations ? final_observations[n, d]
//                                                     : next_observations[n, d]
//   current_observations[n, d] = observations[n, d]
//   dones[n]          = terminated_n   (a truncated episode bootstraps from its final state)
// with ended_n = terminated_n || truncated_n. Actions and rewards are not copied: the replay
// insert reads the policy's actions and the env's rewards where they are. Outputs must not
// alias the sources or each other (current_observations is read and written by the same thread).
// One thread per element (grid-stride); deterministic.
void launch_transition_assembly(const TransitionOutputs& outputs, const TransitionSources& sources,
                                std::size_t env_count, std::size_t observation_size,
                                cudaStream_t stream);

}  // namespace resident::kernels::dqn
