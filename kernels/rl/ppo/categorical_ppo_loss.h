// PPO's clipped loss on a categorical policy head, from the logits to their gradient, in one
// per-row pass plus the loss's finalize (kernels/rl/ppo/categorical_ppo_loss.cu). It computes
// what this sequence computes, with the same bits:
//   launch_categorical_forward (log_prob, entropy)   kernels/nn/categorical.h
//   launch_ppo_loss (d_log_prob, d_entropy, d_value, metrics)   ppo_loss.h
//   launch_categorical_backward (d_logits, overwrite)   kernels/nn/categorical.h
// without writing the per-row log-probs, entropies and their gradients to memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/rl/ppo/ppo_loss.h"

namespace resident::kernels::ppo {

struct CategoricalPpoLossInputs {
  const float* logits = nullptr;         // [B, A] row-major, the actor's output
  const std::int32_t* actions = nullptr;  // [B] the rollout's actions, each in [0, A)
  const float* values = nullptr;         // [B] current critic
  const float* old_log_prob = nullptr;   // [B] from the rollout
  const float* advantages = nullptr;     // [B]
  const float* returns = nullptr;        // [B]
  const float* old_values = nullptr;     // [B] (read only with clip_value_loss)
};

// Overwrites d_logits [B, A] (the gradient of the total loss w.r.t. the logits) and d_value [B]
// (w.r.t. the critic's values), both as in ppo_loss.h / categorical.h; a row whose action lies
// outside [0, A) gets NaN in d_logits and NaN metrics. Metrics: partials
// [ppo_loss_blocks(B), kPpoMetrics] (scratch) get the same per-block sums as launch_ppo_loss's
// first pass (block b, thread t: rows b * 256 + t, then strides of blocks * 256, in order), then
// launch_ppo_loss_finalize: metrics [kPpoMetrics] overwritten, metric_sums [kPpoMetrics] +=
// metrics, *counter += 1. Deterministic (fixed orders, no atomics); nothing allocated or
// synchronized (capturable). Outputs may not alias inputs. B >= 1, A >= 1 and clip > 0, else
// resident::Error.
void launch_categorical_ppo_loss(float* d_logits, float* d_value, float* metrics,
                                 float* metric_sums, float* partials, std::uint64_t* counter,
                                 CategoricalPpoLossInputs inputs, std::size_t batch,
                                 std::size_t actions_count, PpoLossCoefficients coefficients,
                                 cudaStream_t stream);

}  // namespace resident::kernels::ppo
