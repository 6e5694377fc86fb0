// The per-row math of the categorical head (device code: include from .cu files only). Shared by
// categorical_forward / categorical_backward (kernels/nn/categorical.cu) and the fused PPO loss
// (kernels/rl/ppo/categorical_ppo_loss.cu): the same row handed to the same row group
// (row_reduce.cuh, chosen by cols alone) gives the same bits in every kernel that calls these.
//
// A row group's thread rank() owns columns rank, rank + size, ...; every function here is called
// by all threads of the group (they all_reduce), reads the row and writes only its own columns.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/nn/row_reduce.cuh"

namespace resident::kernels::categorical_row {

struct RowStats {
  float max;      // of the row's logits
  float sum;      // sum e^(x - max)
  float log_sum;  // log(sum): log p = x - max - log_sum
  float entropy;  // H, when asked for (else 0)
};

// An online (max, sum e^(x - max)) pass, then, when the entropy is wanted, a pass adding
// t = sum e^z z (z = x - max), so that H = log(sum) - t / sum. Every thread of the group gets
// the same stats.
template <class Group>
__device__ __forceinline__ RowStats row_stats(const float* x_row, std::size_t cols,
                                              bool want_entropy) {
  rowwise::MaxSum acc{-INFINITY, 0.0f};
  for (std::size_t c = Group::rank(); c < cols; c += Group::size())
    acc = rowwise::max_sum_add(acc, x_row[c]);
  acc = Group::all_reduce(acc, rowwise::MaxSumCombine{});
  RowStats stats{acc.max, acc.sum, logf(acc.sum), 0.0f};
  if (want_entropy) {
    float t = 0.0f;
    for (std::size_t c = Group::rank(); c < cols; c += Group::size()) {
      const float z = x_row[c] - acc.max;
      t += expf(z) * z;
    }
    stats.entropy = stats.log_sum - Group::all_reduce(t, rowwise::Sum{}) / acc.sum;
  }
  return stats;
}

__device__ __forceinline__ bool valid_action(std::int32_t action, std::size_t cols) {
  return action >= 0 && static_cast<std::size_t>(action) < cols;
}

// log softmax(x_row)[action]; NaN for an action outside [0, cols). One thread may call it.
__device__ __forceinline__ float log_prob(const float* x_row, std::size_t cols,
                                          std::int32_t action, const RowStats& stats) {
  return valid_action(action, cols)
             ? (x_row[static_cast<std::size_t>(action)] - stats.max) - stats.log_sum
             : NAN;
}

// The upstream gradients of one row; a term whose `with_` flag is false is left out.
struct Upstream {
  bool with_log_prob;
  float d_log_prob;
  std::int32_t action;  // read only with_log_prob
  bool with_entropy;    // needs stats with the entropy
  float d_entropy;
};

// d_row[c] (overwritten or accumulated) gets the sum of the vector-Jacobian products:
//   d_log_prob * (1[c == action] - p_c)  and  -d_entropy * p_c * (log p_c + H);
// every column NaN when with_log_prob and the action lies outside [0, cols).
template <class Group>
__device__ __forceinline__ void backward_row(float* d_row, const float* x_row, std::size_t cols,
                                             const RowStats& stats, const Upstream& up,
                                             bool accumulate) {
  const bool bad_action = up.with_log_prob && !valid_action(up.action, cols);
  for (std::size_t c = Group::rank(); c < cols; c += Group::size()) {
    const float z = x_row[c] - stats.max;
    const float p = expf(z) / stats.sum;
    float gradient = 0.0f;
    if (up.with_log_prob)
      gradient += up.d_log_prob * ((c == static_cast<std::size_t>(up.action) ? 1.0f : 0.0f) - p);
    if (up.with_entropy) gradient -= up.d_entropy * p * ((z - stats.log_sum) + stats.entropy);
    rowwise::write_grad(d_row + c, bad_action ? NAN : gradient, accumulate);
  }
}

}  // namespace resident::kernels::categorical_row
