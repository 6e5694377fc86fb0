// PPO's clipped objective, its gradients and its metrics (kernels/rl/ppo/ppo_loss.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::ppo {

// The metrics of a minibatch, in this order in every [kPpoMetrics] array.
enum PpoMetric : std::size_t {
  kPolicyLoss = 0,  // mean of max(-A r, -A clip(r, 1 - c, 1 + c))
  kValueLoss,       // mean of 0.5 max((v - R)^2, (v_clip - R)^2), or 0.5 (v - R)^2 unclipped
  kEntropy,         // mean entropy
  kApproxKl,        // mean of (r - 1) - log r
  kClipFraction,    // share of rows with |r - 1| > c
  kPpoMetrics
};

struct PpoLossCoefficients {
  float clip = 0.2f;            // c > 0
  bool clip_value_loss = true;  // v_clip = v_old + clamp(v - v_old, -c, c)
  float entropy = 0.01f;        // total loss = policy - entropy_coef * entropy + value_coef * value
  float value = 0.5f;
};

struct PpoLossInputs {
  const float* log_prob = nullptr;      // [B] under the current policy
  const float* entropy = nullptr;       // [B]
  const float* values = nullptr;        // [B] current critic
  const float* old_log_prob = nullptr;  // [B] from the rollout
  const float* advantages = nullptr;    // [B]
  const float* returns = nullptr;       // [B]
  const float* old_values = nullptr;    // [B]
};

// Gradients of the total loss, [B] each, overwritten:
//   d_log_prob = r * (-A if -A r >= -A clip(r) else 0) / B
//   d_entropy  = -entropy_coef / B
//   d_value    = value_coef * (v - R) / B where the unclipped value term is the larger (ties
//                included), else value_coef * (v_clip - R) * [|v - v_old| <= c] / B
struct PpoLossGrads {
  float* d_log_prob = nullptr;
  float* d_entropy = nullptr;
  float* d_value = nullptr;
};

// Blocks of the first pass for a batch of B (the rows of `partials` [blocks, kPpoMetrics]).
std::size_t ppo_loss_blocks(std::size_t batch);

// Pass 1: per-row terms and gradients; each block writes its fixed share's metric sums into
// partials. Pass 2 (one block): metrics [kPpoMetrics] = column sums of partials (fixed order,
// fp64) / B, overwritten; metric_sums [kPpoMetrics] += metrics (the update's running sums); then
// *counter += 1 (the minibatch update counter the gather and permutation read). Deterministic,
// no atomics; capturable. B >= 1.
void launch_ppo_loss(PpoLossGrads grads, float* metrics, float* metric_sums, float* partials,
                     std::uint64_t* counter, PpoLossInputs inputs, std::size_t batch,
                     PpoLossCoefficients coefficients, cudaStream_t stream);

// Pass 2 alone, over the ppo_loss_blocks(batch) partials a first pass wrote (launch_ppo_loss's,
// or the fused one of categorical_ppo_loss.h): metrics overwritten, metric_sums accumulated,
// *counter += 1, as above. One block; deterministic; capturable. B >= 1.
void launch_ppo_loss_finalize(float* metrics, float* metric_sums, std::uint64_t* counter,
                              const float* partials, std::size_t batch, cudaStream_t stream);

}  // namespace resident::kernels::ppo
