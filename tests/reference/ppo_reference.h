// PPO's clipped objective and its gradients, the sampler's inverse CDF and the permutation
// keys, in double precision: the oracles of kernels/rl/ppo.
//
// Per row i of a minibatch of B, with r = exp(lp - lp_old), c = clip:
//   policy_i = max(-A r, -A clamp(r, 1 - c, 1 + c))
//   value_i  = 0.5 max((v - R)^2, (v_old + clamp(v - v_old, -c, c) - R)^2)   (clipped)
//            = 0.5 (v - R)^2                                                (unclipped)
//   total    = mean(policy) - entropy_coef * mean(entropy) + value_coef * mean(value)
// Gradients of total with respect to lp, entropy and v per row (the subgradient at a tie takes
// the unclipped branch; clamp passes the gradient on the closed interval, as torch.clamp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace resident::reference {

struct PpoLossCoefficients {
  double clip = 0.2;
  bool clip_value_loss = true;
  double entropy = 0.01;
  double value = 0.5;
};

struct PpoLossBatch {
  std::span<const double> log_prob, entropy, values;                      // current, [B]
  std::span<const double> old_log_prob, advantages, returns, old_values;  // rollout, [B]
};

struct PpoLossResult {
  double policy_loss = 0.0, value_loss = 0.0, entropy = 0.0, approx_kl = 0.0, clip_fraction = 0.0;
  double total = 0.0;
  std::vector<double> d_log_prob, d_entropy, d_value;  // [B]
};

PpoLossResult ppo_loss(const PpoLossBatch& batch, const PpoLossCoefficients& coefficients);

// The sampler's rule for one row: u in [0, 1); the first c with u * S < sum_{c' <= c} e^(x_c' -
// max) (S the full sum), else the last c of nonzero mass.
std::int32_t sample_categorical(std::span<const double> logits, double u);

// The 32-bit key of item i of the permutation drawn at `draw` (cuRAND Philox, subsequence i,
// offset 4 * draw, first word), and the permutation those keys give under a stable sort.
std::vector<std::uint32_t> random_permutation(std::size_t n, std::uint64_t philox_seed,
                                              std::uint64_t draw);

}  // namespace resident::reference
