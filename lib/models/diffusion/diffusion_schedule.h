// The DDPM noise schedule (MODELS.md section 6), computed on the host in double at setup and cast
// to float per step for the kernels. With T steps and beta_t, t = 0..T-1:
//   alpha_t = 1 - beta_t, alpha_bar_t = prod_{s <= t} alpha_s, alpha_bar_{-1} = 1
//   q_sample:  x_t = sqrt(alpha_bar_t) x_0 + sqrt(1 - alpha_bar_t) eps
//   x0_hat  = sqrt(1 / alpha_bar_t) x_t - sqrt(1 / alpha_bar_t - 1) eps_hat
//   x_{t-1} = c1_t x0_hat + c2_t x_t + [t > 0] sigma_t z
//   c1_t = beta_t sqrt(alpha_bar_{t-1}) / (1 - alpha_bar_t)
//   c2_t = (1 - alpha_bar_{t-1}) sqrt(alpha_t) / (1 - alpha_bar_t)
//   beta~_t = beta_t (1 - alpha_bar_{t-1}) / (1 - alpha_bar_t)   (beta~_0 = 0)
//   sigma_t = sqrt(beta~_t) (FixedSmall) or sqrt(beta_t) (FixedLarge); sigma_0 is never used.
// Linear: beta = linspace(1e-4 * 1000 / T, 0.02 * 1000 / T, T), clipped at 0.999 (T <= 20 would
// reach 1). Cosine (s = 0.008): with f(u) = cos^2((u / T + s) / (1 + s) pi / 2),
// beta_t = clip(1 - f(t + 1) / f(t), 0, 0.999), and alpha_bar recomputed as the product of the
// clipped alphas (lucidrains' cosine_beta_schedule).
#pragma once

#include <cstddef>
#include <vector>

#include "lib/models/diffusion/diffusion_config.h"

namespace resident::models {

inline constexpr double kDiffusionCosineOffset = 0.008;
inline constexpr double kDiffusionMaxBeta = 0.999;

struct DiffusionScheduleTable {
  std::vector<double> beta, alpha_bar, alpha_bar_prev;  // [T] each
  std::vector<double> sqrt_alpha_bar, sqrt_one_minus_alpha_bar;
  std::vector<double> sqrt_recip_alpha_bar, sqrt_recip_alpha_bar_minus_one;
  std::vector<double> posterior_variance, c1, c2, sigma;
  std::size_t steps() const noexcept { return beta.size(); }
};

// Throws resident::Error for steps outside [2, kDiffusionMaxSteps].
DiffusionScheduleTable make_diffusion_schedule(DiffusionSchedule schedule, std::size_t steps,
                                               DiffusionVariance variance);

}  // namespace resident::models
