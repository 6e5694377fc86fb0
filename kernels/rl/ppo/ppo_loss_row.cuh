// The per-row math of PPO's clipped loss and its block reduction (device code: include from .cu
// files only). Shared by ppo_loss_rows (kernels/rl/ppo/ppo_loss.cu) and the fused categorical
// PPO loss (kernels/rl/ppo/categorical_ppo_loss.cu): a thread that visits the same rows in the
// same order gets the same gradients and the same metric sums, and a block of kLossThreads
// threads that reduces them writes the same partials, bit for bit.
#pragma once

#include <cmath>
#include <cstddef>
#include <cub/block/block_reduce.cuh>

#include "kernels/rl/ppo/ppo_loss.h"

namespace resident::kernels::ppo::loss_row {

// Threads of every block that writes ppo_loss partials: block b's thread t visits rows
// i = b * kLossThreads + t, then strides of gridDim * kLossThreads, gridDim = ppo_loss_blocks(B).
inline constexpr unsigned kLossThreads = 256;
using LossBlockSum = cub::BlockReduce<float, kLossThreads>;

struct RowInputs {
  float log_prob;      // under the current policy
  float entropy;
  float value;         // current critic
  float old_log_prob;  // from the rollout
  float advantage;
  float ret;           // the return target
  float old_value;     // read only with clip_value_loss
};

struct RowGrads {
  float d_log_prob;
  float d_entropy;
  float d_value;
};

// Adds the row's terms to sums (indexed by PpoMetric) and returns its gradients (ppo_loss.h).
__device__ __forceinline__ RowGrads loss_row(float (&sums)[kPpoMetrics], const RowInputs& in,
                                             const PpoLossCoefficients& k, float inverse_batch) {
  RowGrads g;
  const float log_ratio = in.log_prob - in.old_log_prob;
  const float ratio = expf(log_ratio);
  const float a = in.advantage;
  const float unclipped = -a * ratio;
  const float clipped = -a * fminf(fmaxf(ratio, 1.0f - k.clip), 1.0f + k.clip);
  const bool unclipped_wins = unclipped >= clipped;
  sums[kPolicyLoss] += unclipped_wins ? unclipped : clipped;
  g.d_log_prob = (unclipped_wins ? -a * ratio : 0.0f) * inverse_batch;
  g.d_entropy = -k.entropy * inverse_batch;

  const float v = in.value, target = in.ret;
  const float error = v - target;
  float value_loss = error * error, d_value = error;
  if (k.clip_value_loss) {
    const float old = in.old_value;
    const float change = v - old;
    const float v_clip = old + fminf(fmaxf(change, -k.clip), k.clip);
    const float clipped_error = v_clip - target;
    if (clipped_error * clipped_error > value_loss) {
      value_loss = clipped_error * clipped_error;
      d_value = fabsf(change) <= k.clip ? clipped_error : 0.0f;
    }
  }
  sums[kValueLoss] += 0.5f * value_loss;
  g.d_value = k.value * d_value * inverse_batch;
  sums[kEntropy] += in.entropy;
  sums[kApproxKl] += (ratio - 1.0f) - log_ratio;
  sums[kClipFraction] += fabsf(ratio - 1.0f) > k.clip ? 1.0f : 0.0f;
  return g;
}

// partials[blockIdx.x * kPpoMetrics + m] = the block's sum of sums[m] (cub::BlockReduce, a fixed
// order for the fixed block size). Called by all kLossThreads threads of the block.
__device__ __forceinline__ void store_block_partials(float* partials,
                                                     const float (&sums)[kPpoMetrics],
                                                     LossBlockSum::TempStorage& temp) {
  for (std::size_t m = 0; m < kPpoMetrics; ++m) {
    const float total = LossBlockSum(temp).Sum(sums[m]);
    if (threadIdx.x == 0) partials[blockIdx.x * kPpoMetrics + m] = total;
    __syncthreads();
  }
}

}  // namespace resident::kernels::ppo::loss_row
