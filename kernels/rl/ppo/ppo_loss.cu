// PPO loss rows and their deterministic reduction (contract in ppo_loss.h).
#include "kernels/rl/ppo/ppo_loss.h"

#include <algorithm>
#include <cmath>
#include <cub/block/block_reduce.cuh>
#include <string>

#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels::ppo {

namespace {

constexpr unsigned kThreads = 256;
constexpr std::size_t kMaxBlocks = 1024;

__global__ void __launch_bounds__(kThreads)
    ppo_loss_rows(PpoLossGrads grads, float* partials, PpoLossInputs in, std::size_t batch,
                  PpoLossCoefficients k) {
  using BlockSum = cub::BlockReduce<float, kThreads>;
  __shared__ typename BlockSum::TempStorage temp;
  const float inverse_batch = 1.0f / static_cast<float>(batch);
  float sums[kPpoMetrics] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(kThreads) + threadIdx.x; i < batch;
       i += static_cast<std::size_t>(gridDim.x) * kThreads) {
    const float log_ratio = in.log_prob[i] - in.old_log_prob[i];
    const float ratio = expf(log_ratio);
    const float a = in.advantages[i];
    const float unclipped = -a * ratio;
    const float clipped = -a * fminf(fmaxf(ratio, 1.0f - k.clip), 1.0f + k.clip);
    const bool unclipped_wins = unclipped >= clipped;
    sums[kPolicyLoss] += unclipped_wins ? unclipped : clipped;
    grads.d_log_prob[i] = (unclipped_wins ? -a * ratio : 0.0f) * inverse_batch;
    grads.d_entropy[i] = -k.entropy * inverse_batch;

    const float v = in.values[i], target = in.returns[i];
    const float error = v - target;
    float value_loss = error * error, d_value = error;
    if (k.clip_value_loss) {
      const float old = in.old_values[i];
      const float change = v - old;
      const float v_clip = old + fminf(fmaxf(change, -k.clip), k.clip);
      const float clipped_error = v_clip - target;
      if (clipped_error * clipped_error > value_loss) {
        value_loss = clipped_error * clipped_error;
        d_value = fabsf(change) <= k.clip ? clipped_error : 0.0f;
      }
    }
    sums[kValueLoss] += 0.5f * value_loss;
    grads.d_value[i] = k.value * d_value * inverse_batch;
    sums[kEntropy] += in.entropy[i];
    sums[kApproxKl] += (ratio - 1.0f) - log_ratio;
    sums[kClipFraction] += fabsf(ratio - 1.0f) > k.clip ? 1.0f : 0.0f;
  }
  for (std::size_t m = 0; m < kPpoMetrics; ++m) {
    const float total = BlockSum(temp).Sum(sums[m]);
    if (threadIdx.x == 0) partials[blockIdx.x * kPpoMetrics + m] = total;
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kThreads)
    ppo_loss_finalize(float* metrics, float* metric_sums, std::uint64_t* counter,
                      const float* partials, std::size_t blocks, std::size_t batch) {
  using BlockSum = cub::BlockReduce<double, kThreads>;
  __shared__ typename BlockSum::TempStorage temp;
  for (std::size_t m = 0; m < kPpoMetrics; ++m) {
    double s = 0.0;
    for (std::size_t b = threadIdx.x; b < blocks; b += kThreads)
      s += static_cast<double>(partials[b * kPpoMetrics + m]);
    const double total = BlockSum(temp).Sum(s);
    if (threadIdx.x == 0) {
      const float mean = static_cast<float>(total / static_cast<double>(batch));
      metrics[m] = mean;
      metric_sums[m] += mean;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *counter += 1;
}

}  // namespace

std::size_t ppo_loss_blocks(std::size_t batch) {
  return std::clamp<std::size_t>((batch + 4 * kThreads - 1) / (4 * kThreads), 1, kMaxBlocks);
}

void launch_ppo_loss(PpoLossGrads grads, float* metrics, float* metric_sums, float* partials,
                     std::uint64_t* counter, PpoLossInputs inputs, std::size_t batch,
                     PpoLossCoefficients coefficients, cudaStream_t stream) {
  if (batch == 0 || !(coefficients.clip > 0.0f))
    throw Error("launch_ppo_loss", "invalid argument",
                "batch = " + std::to_string(batch) + " (>= 1), clip = " +
                    std::to_string(coefficients.clip) + " (> 0)",
                __FILE__, __LINE__);
  const NvtxRange range("ppo/loss");
  const std::size_t blocks = ppo_loss_blocks(batch);
  ppo_loss_rows<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(grads, partials, inputs,
                                                                         batch, coefficients);
  RESIDENT_CHECK_LAUNCH("ppo_loss_rows");
  ppo_loss_finalize<<<1, kThreads, 0, stream>>>(metrics, metric_sums, counter, partials, blocks,
                                                batch);
  RESIDENT_CHECK_LAUNCH("ppo_loss_finalize");
}

}  // namespace resident::kernels::ppo
