// One categorical draw from a row of logits (sample_actions.h has the contract): the device code
// shared by launch_sample_actions and launch_policy_forward_sample, so both give the same bits.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/core/philox.cuh"
#include "kernels/rl/ppo/sample_actions.h"

namespace resident::kernels::ppo::categorical_sample {

__device__ inline float row_max(const float* x, std::size_t cols) {
  float m = -INFINITY;
  for (std::size_t c = 0; c < cols; ++c) m = fmaxf(m, x[c]);
  return m;
}

__device__ inline float row_sum(const float* x, std::size_t cols, float m) {
  float s = 0.0f;
  for (std::size_t c = 0; c < cols; ++c) s += expf(x[c] - m);
  return s;
}

// Row r of logits x [cols]: draws from Philox (philox_seed, subsequence r, offset
// 4 * draw_index), writes actions[r] and, with a store, its row t = draw_index % T.
__device__ inline void sample_row(std::int32_t* actions, const SampleStore& store, const float* x,
                                  std::size_t r, std::size_t rows, std::size_t cols,
                                  std::uint64_t philox_seed, std::uint64_t draw_index) {
  const float m = row_max(x, cols);
  const float sum = row_sum(x, cols, m);
  curandStatePhilox4_32_10_t state = philox_state({philox_seed, 4 * draw_index}, r);
  const float u = static_cast<float>(curand(&state) >> 8) * 0x1p-24f;
  const float target = u * sum;
  std::int32_t action = -1, last_positive = 0;
  float cumulative = 0.0f;
  for (std::size_t c = 0; c < cols; ++c) {
    const float e = expf(x[c] - m);
    if (e > 0.0f) last_positive = static_cast<std::int32_t>(c);
    cumulative += e;
    if (action < 0 && target < cumulative) action = static_cast<std::int32_t>(c);
  }
  if (action < 0) action = last_positive;
  actions[r] = action;
  if (store.actions != nullptr) {
    const std::size_t t = static_cast<std::size_t>(draw_index % store.steps);
    store.actions[t * rows + r] = action;
    store.log_prob[t * rows + r] = (x[action] - m) - logf(sum);
  }
}

}  // namespace resident::kernels::ppo::categorical_sample
