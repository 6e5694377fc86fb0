// Inverse-CDF sampling from logits, one thread per row (contract in sample_actions.h).
#include "kernels/rl/ppo/sample_actions.h"

#include <cmath>

#include "kernels/core/launch_config.h"
#include "kernels/rl/ppo/categorical_sample.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::ppo {

namespace {

constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    sample_actions(std::int32_t* actions, SampleStore store, const float* logits, std::size_t rows,
                   std::size_t cols, std::uint64_t philox_seed, const std::uint64_t* counter) {
  const std::uint64_t draw_index = *counter;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; r < rows;
       r += stride)
    categorical_sample::sample_row(actions, store, logits + r * cols, r, rows, cols, philox_seed,
                                   draw_index);
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
    const float m = categorical_sample::row_max(x, cols);
    const float inverse = 1.0f / categorical_sample::row_sum(x, cols, m);
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
