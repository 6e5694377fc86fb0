// Inverse-CDF sampling from logits, one thread per row (contract in sample_actions.h).
#include "kernels/rl/ppo/sample_actions.h"

#include <cmath>

#include "kernels/core/launch_config.h"
#include "kernels/core/philox.cuh"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels::ppo {

namespace {

constexpr unsigned kThreads = 256;

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

__global__ void __launch_bounds__(kThreads)
    sample_actions(std::int32_t* actions, SampleStore store, const float* logits, std::size_t rows,
                   std::size_t cols, std::uint64_t philox_seed, const std::uint64_t* counter) {
  const std::uint64_t draw_index = *counter;
  const std::size_t t = static_cast<std::size_t>(draw_index % store.steps);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; r < rows;
       r += stride) {
    const float* x = logits + r * cols;
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
      store.actions[t * rows + r] = action;
      store.log_prob[t * rows + r] = (x[action] - m) - logf(sum);
    }
  }
  if (store.step_slot != nullptr && blockIdx.x == 0 && threadIdx.x == 0)
    *store.step_slot = draw_index;
}

__global__ void __launch_bounds__(kThreads)
    policy_probabilities(float* probabilities, const float* logits, std::size_t rows,
                         std::size_t cols) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; r < rows;
       r += stride) {
    const float* x = logits + r * cols;
    const float m = row_max(x, cols);
    const float inverse = 1.0f / row_sum(x, cols, m);
    for (std::size_t c = 0; c < cols; ++c) probabilities[r * cols + c] = expf(x[c] - m) * inverse;
  }
}

}  // namespace

void launch_sample_actions(std::int32_t* actions, SampleStore store, const float* logits,
                           std::size_t rows, std::size_t cols, std::uint64_t philox_seed,
                           const std::uint64_t* counter, cudaStream_t stream) {
  if (cols == 0 || store.steps == 0 ||
      (store.actions != nullptr) != (store.log_prob != nullptr))
    throw Error("launch_sample_actions", "invalid argument",
                "cols = " + std::to_string(cols) + ", steps = " + std::to_string(store.steps) +
                    " (both >= 1; store.actions and store.log_prob both set or both null)",
                __FILE__, __LINE__);
  if (rows == 0) return;
  const NvtxRange range("ppo/sample_actions");
  sample_actions<<<grid_stride_blocks(rows, kThreads), kThreads, 0, stream>>>(
      actions, store, logits, rows, cols, philox_seed, counter);
  RESIDENT_CHECK_LAUNCH("sample_actions");
}

void launch_policy_probabilities(float* probabilities, const float* logits, std::size_t rows,
                                 std::size_t cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  const NvtxRange range("ppo/policy_probabilities");
  policy_probabilities<<<grid_stride_blocks(rows, kThreads), kThreads, 0, stream>>>(
      probabilities, logits, rows, cols);
  RESIDENT_CHECK_LAUNCH("policy_probabilities");
}

}  // namespace resident::kernels::ppo
