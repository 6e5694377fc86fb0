// TD errors of a sampled batch (kernels/rl/dqn/td_error.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::dqn {

// q_taken [B] = q_values[b, actions_b] and td_errors [B] = targets_b - q_taken_b (float), both
// overwritten. q_values [B, A] row-major; actions [B] in [0, A) (an action outside gives NaN in
// both outputs, which the metrics count as non-finite). The TD errors stay on the device: they
// feed the replay's priority update and the non-finite counters. One thread per row;
// deterministic. `targets` may not alias the outputs.
void launch_td_error(float* q_taken, float* td_errors, const float* q_values,
                     const std::int32_t* actions, const float* targets, std::size_t batch,
                     std::size_t action_count, cudaStream_t stream);

}  // namespace resident::kernels::dqn
