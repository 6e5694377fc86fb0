// GAE(lambda) (Schulman et al. 2016) over a rollout of T steps of N environments, and the
// advantage normalization of PPO: the oracle of the GPU GAE kernel. Double precision.
//
// Layout: time-major, element (t, n) at index t * N + n.
//
// Per environment n, backwards from t = T - 1 to 0, with A_T = 0:
//   if terminated_t:                  delta_t = r_t - V_t
//                                     A_t     = delta_t
//   else if truncated_t:              delta_t = r_t + gamma * V_final,t - V_t
//                                     A_t     = delta_t
//   else:                             delta_t = r_t + gamma * V_{t+1} - V_t
//                                     A_t     = delta_t + gamma * lambda * A_{t+1}
//   returns_t = A_t + V_t
// V_t = values[t, n]; V_T = values[T, n] bootstraps the last step of an episode still running
// at the end of the rollout; V_final,t = final_values[t, n] is the value of the true final
// observation of an episode cut by the time limit (with auto-reset, values[t + 1, n] is the
// value of the next episode's first observation, which neither a termination nor a truncation
// may use). A termination or a truncation at t cuts the trace: A_t does not see A_{t+1}.
//
// Normalization over all T * N advantages:
//   mean = sum(A) / (T N),  std = sqrt(sum((A - mean)^2) / (T N))   (population std)
//   normalized = (A - mean) / (std + epsilon),  epsilon = 1e-8 by default
// (epsilon added to the std, as in Stable-Baselines3 and CleanRL; their std is torch's unbiased
// one, dividing by T N - 1.)
//
// Errors (sizes, gamma or lambda outside [0, 1], no advantages, a non-positive epsilon) throw
// std::invalid_argument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace resident::reference {

struct GaeRollout {
  std::size_t steps = 0;                     // T >= 1
  std::size_t env_count = 0;                 // N >= 1
  std::span<const double> rewards;           // [T, N]
  std::span<const double> values;            // [T + 1, N]
  std::span<const std::uint8_t> terminated;  // [T, N], 0 or nonzero
  std::span<const std::uint8_t> truncated;   // [T, N], 0 or nonzero
  std::span<const double> final_values;      // [T, N]; read only where truncated && !terminated
};

struct GaeResult {
  std::vector<double> advantages;  // [T, N]
  std::vector<double> returns;     // [T, N]
};

GaeResult compute_gae(const GaeRollout& rollout, double gamma, double lambda);

std::vector<double> normalize_advantages(std::span<const double> advantages, double epsilon = 1e-8);

}  // namespace resident::reference
