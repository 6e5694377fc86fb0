// Gradient of the taken-action values back to the Q rows (kernels/rl/dqn/action_value_grad.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::dqn {

// d_q_values [B, A] (OVERWRITTEN) = d_q_taken_b in column actions_b, 0 elsewhere: the
// transpose of launch_td_error's gather. An action outside [0, A) gives a zero row. One thread
// per element; deterministic.
void launch_action_value_grad(float* d_q_values, const float* d_q_taken,
                              const std::int32_t* actions, std::size_t batch,
                              std::size_t action_count, cudaStream_t stream);

}  // namespace resident::kernels::dqn
