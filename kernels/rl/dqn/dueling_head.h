// Dueling head (Wang et al. 2016) on top of an MLP's output (kernels/rl/dqn/dueling_head.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::dqn {

// head [B, 1 + A] row-major: column 0 the value V, columns 1..A the advantages.
// Forward, q [B, A] OVERWRITTEN: q[b, a] = V_b + (adv_ba - mean_b), mean_b = (sum_a adv_ba) / A
// summed in order a = 0..A-1 in float.
void launch_dueling_forward(float* q, const float* head, std::size_t batch,
                            std::size_t action_count, cudaStream_t stream);

// Backward, d_head [B, 1 + A] OVERWRITTEN from d_q [B, A]:
//   d_head[b, 0] = s_b = sum_a d_q[b, a] (in order),  d_head[b, 1 + a] = d_q[b, a] - s_b / A.
// One thread per row for both; deterministic.
void launch_dueling_backward(float* d_head, const float* d_q, std::size_t batch,
                             std::size_t action_count, cudaStream_t stream);

}  // namespace resident::kernels::dqn
