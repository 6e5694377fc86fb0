#include "lib/models/diffusion/diffusion_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "kernels/core/error.h"

namespace resident::models {

DiffusionScheduleTable make_diffusion_schedule(DiffusionSchedule schedule, std::size_t steps,
                                               DiffusionVariance variance) {
  if (steps < 2 || steps > kDiffusionMaxSteps)
    throw Error("make_diffusion_schedule", "invalid argument",
                "steps = " + std::to_string(steps) + ", allowed [2, " +
                    std::to_string(kDiffusionMaxSteps) + "]",
                __FILE__, __LINE__);
  const auto t_count = static_cast<double>(steps);
  DiffusionScheduleTable s;
  s.beta.resize(steps);
  if (schedule == DiffusionSchedule::Linear) {
    const double scale = 1000.0 / t_count;
    const double first = 1e-4 * scale, last = 0.02 * scale;
    for (std::size_t t = 0; t < steps; ++t)
      s.beta[t] = std::min(first + (last - first) * static_cast<double>(t) / (t_count - 1.0),
                           kDiffusionMaxBeta);
  } else {
    const double off = kDiffusionCosineOffset;
    const auto f = [&](double u) {
      const double c = std::cos((u / t_count + off) / (1.0 + off) * std::numbers::pi / 2.0);
      return c * c;
    };
    for (std::size_t t = 0; t < steps; ++t) {
      const double beta = 1.0 - f(static_cast<double>(t) + 1.0) / f(static_cast<double>(t));
      s.beta[t] = std::clamp(beta, 0.0, kDiffusionMaxBeta);
    }
  }
  const auto resize = [steps](std::vector<double>& v) { v.assign(steps, 0.0); };
  for (std::vector<double>* v :
       {&s.alpha_bar, &s.alpha_bar_prev, &s.sqrt_alpha_bar, &s.sqrt_one_minus_alpha_bar,
        &s.sqrt_recip_alpha_bar, &s.sqrt_recip_alpha_bar_minus_one, &s.posterior_variance, &s.c1,
        &s.c2, &s.sigma})
    resize(*v);
  double product = 1.0;
  for (std::size_t t = 0; t < steps; ++t) {
    const double alpha = 1.0 - s.beta[t];
    s.alpha_bar_prev[t] = product;
    product *= alpha;
    s.alpha_bar[t] = product;
    const double ab = s.alpha_bar[t], abp = s.alpha_bar_prev[t];
    s.sqrt_alpha_bar[t] = std::sqrt(ab);
    s.sqrt_one_minus_alpha_bar[t] = std::sqrt(1.0 - ab);
    s.sqrt_recip_alpha_bar[t] = std::sqrt(1.0 / ab);
    s.sqrt_recip_alpha_bar_minus_one[t] = std::sqrt(1.0 / ab - 1.0);
    s.posterior_variance[t] = s.beta[t] * (1.0 - abp) / (1.0 - ab);
    s.c1[t] = s.beta[t] * std::sqrt(abp) / (1.0 - ab);
    s.c2[t] = (1.0 - abp) * std::sqrt(alpha) / (1.0 - ab);
    s.sigma[t] =
        std::sqrt(variance == DiffusionVariance::FixedSmall ? s.posterior_variance[t] : s.beta[t]);
  }
  return s;
}

}  // namespace resident::models
