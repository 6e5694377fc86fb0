// AdamW over a flat parameter vector, the global gradient norm, and global-norm clipping.
#include <cmath>
#include <string>

#include "tests/reference/nn_reference.h"
#include "tests/reference/nn_reference_checks.h"

namespace resident::reference {

using detail::require;
using detail::require_size;

void adamw_step(const AdamWConfig& config, std::uint64_t step, std::span<double> params,
                std::span<const double> grads, std::span<double> m, std::span<double> v,
                std::span<const std::uint8_t> decay_mask) {
  constexpr const char* kOp = "adamw_step";
  require(step >= 1, kOp, "step counts updates from 1 (bias correction divides by 1 - beta^step)");
  require_size(kOp, "grads", grads.size(), params.size());
  require_size(kOp, "m", m.size(), params.size());
  require_size(kOp, "v", v.size(), params.size());
  require_size(kOp, "decay_mask", decay_mask.size(), params.size());
  detail::require_binary_mask(kOp, "decay_mask", decay_mask);
  const double t = static_cast<double>(step);
  const double bias_correction1 = 1.0 - std::pow(config.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(config.beta2, t);
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (decay_mask[i] != 0) params[i] *= 1.0 - config.lr * config.weight_decay;
    m[i] = config.beta1 * m[i] + (1.0 - config.beta1) * grads[i];
    v[i] = config.beta2 * v[i] + (1.0 - config.beta2) * grads[i] * grads[i];
    const double m_hat = m[i] / bias_correction1;
    const double v_hat = v[i] / bias_correction2;
    params[i] -= config.lr * m_hat / (std::sqrt(v_hat) + config.eps);
  }
}

double global_norm(std::span<const double> grads) {
  double squares = 0.0;
  for (const double g : grads) squares += g * g;
  return std::sqrt(squares);
}

double clip_global_norm(std::span<double> grads, double max_norm) {
  require(max_norm > 0.0, "clip_global_norm",
          "max_norm = " + std::to_string(max_norm) + ", must be > 0");
  const double norm = global_norm(grads);
  if (norm <= max_norm) return 1.0;
  const double scale = max_norm / norm;
  for (double& g : grads) g *= scale;
  return scale;
}

}  // namespace resident::reference
