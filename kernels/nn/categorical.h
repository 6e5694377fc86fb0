// A categorical distribution from logits [rows, cols] (PPO's policy head;
// kernels/nn/categorical.cu), as the reference defines it (tests/reference/nn_reference.h):
//   log_prob[r] = log softmax(logits_r)[actions[r]],  entropy[r] = -sum_c p_rc log p_rc.
// Row-major float buffers on the device; one row per warp group (cols <= 1024) or per block,
// max-subtracted; deterministic (fixed reduction order, no atomics; results depend only on the
// values and cols); nothing allocated or synchronized (capturable). rows == 0 or cols == 0 does
// nothing. A scalar of them (e.g. the mean entropy) comes from launch_mean (losses.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/core/grad_mode.h"

namespace resident::kernels {

// Overwrites log_prob [rows] and entropy [rows]; either may be null (not computed). actions
// [rows], each in [0, cols), is read only for log_prob; an action outside that range yields a
// NaN log_prob (device code cannot throw).
void launch_categorical_forward(float* log_prob, float* entropy, const float* logits,
                                const std::int32_t* actions, std::size_t rows, std::size_t cols,
                                cudaStream_t stream);

// d_logits [rows, cols] gets the sum of the vector-Jacobian products of the non-null upstream
// gradients, overwritten or accumulated as `mode` says:
//   d_log_prob [rows]: d_log_prob_r * (1[c == actions_r] - p_rc)
//   d_entropy [rows]:  -d_entropy_r * p_rc * (log p_rc + H_r)
// With both null, overwrite writes zeros and accumulate leaves d_logits as it is. With d_log_prob,
// a row whose action lies outside [0, cols) gets NaN gradients.
void launch_categorical_backward(float* d_logits, const float* logits, const std::int32_t* actions,
                                 const float* d_log_prob, const float* d_entropy, std::size_t rows,
                                 std::size_t cols, nn::GradMode mode, cudaStream_t stream);

}  // namespace resident::kernels
