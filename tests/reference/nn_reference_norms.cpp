// LayerNorm and RMSNorm over the last dimension, with their backward.
#include <cmath>
#include <string>

#include "tests/reference/nn_reference.h"
#include "tests/reference/nn_reference_checks.h"

namespace resident::reference {

using detail::require;
using detail::require_size;
using detail::require_size_or_empty;
using detail::write_grad;

namespace {

double mean(std::span<const double> row) {
  double sum = 0.0;
  for (const double v : row) sum += v;
  return sum / static_cast<double>(row.size());
}

// Mean, 1 / sqrt(biased variance + eps), and the normalized row (x - mean) / sqrt(var + eps).
struct NormalizedRow {
  double mean = 0.0;
  double rstd = 0.0;
  std::vector<double> xhat;
};

NormalizedRow normalize_row(std::span<const double> row, double eps) {
  NormalizedRow n;
  n.mean = mean(row);
  double squares = 0.0;
  for (const double v : row) squares += (v - n.mean) * (v - n.mean);
  n.rstd = 1.0 / std::sqrt(squares / static_cast<double>(row.size()) + eps);
  n.xhat.resize(row.size());
  for (std::size_t c = 0; c < row.size(); ++c) n.xhat[c] = (row[c] - n.mean) * n.rstd;
  return n;
}

// 1 / sqrt(mean(x^2) + eps)
double inverse_rms(std::span<const double> row, double eps) {
  double squares = 0.0;
  for (const double v : row) squares += v * v;
  return 1.0 / std::sqrt(squares / static_cast<double>(row.size()) + eps);
}

void require_eps(const char* op, double eps) {
  require(eps > 0.0 && std::isfinite(eps), op, "eps = " + std::to_string(eps) + ", must be > 0");
}

void require_norm_args(const char* op, std::size_t rows, std::size_t cols,
                       std::span<const double> x, std::span<const double> gamma, double eps) {
  require(cols > 0, op, "cols must be > 0");
  require_size(op, "x", x.size(), rows * cols);
  require_size(op, "gamma", gamma.size(), cols);
  require_eps(op, eps);
}

}  // namespace

std::vector<double> layer_norm_forward(std::size_t rows, std::size_t cols,
                                       std::span<const double> x, std::span<const double> gamma,
                                       std::span<const double> beta, double eps) {
  require_norm_args("layer_norm_forward", rows, cols, x, gamma, eps);
  require_size("layer_norm_forward", "beta", beta.size(), cols);
  std::vector<double> y(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const NormalizedRow n = normalize_row(x.subspan(r * cols, cols), eps);
    for (std::size_t c = 0; c < cols; ++c) y[r * cols + c] = n.xhat[c] * gamma[c] + beta[c];
  }
  return y;
}

// With g = dy * gamma: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
void layer_norm_backward(std::size_t rows, std::size_t cols, std::span<const double> x,
                         std::span<const double> gamma, std::span<const double> dy, double eps,
                         const LayerNormGrads& grads, GradMode mode) {
  constexpr const char* kOp = "layer_norm_backward";
  require_norm_args(kOp, rows, cols, x, gamma, eps);
  require_size(kOp, "dy", dy.size(), rows * cols);
  require_size_or_empty(kOp, "dx", grads.dx.size(), rows * cols);
  require_size_or_empty(kOp, "dgamma", grads.dgamma.size(), cols);
  require_size_or_empty(kOp, "dbeta", grads.dbeta.size(), cols);
  std::vector<double> dgamma(cols, 0.0);
  std::vector<double> dbeta(cols, 0.0);
  std::vector<double> g(cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const NormalizedRow n = normalize_row(x.subspan(r * cols, cols), eps);
    const auto dy_row = dy.subspan(r * cols, cols);
    double g_mean = 0.0;
    double g_xhat_mean = 0.0;
    for (std::size_t c = 0; c < cols; ++c) {
      g[c] = dy_row[c] * gamma[c];
      g_mean += g[c];
      g_xhat_mean += g[c] * n.xhat[c];
      dgamma[c] += dy_row[c] * n.xhat[c];
      dbeta[c] += dy_row[c];
    }
    g_mean /= static_cast<double>(cols);
    g_xhat_mean /= static_cast<double>(cols);
    if (grads.dx.empty()) continue;
    for (std::size_t c = 0; c < cols; ++c) {
      write_grad(grads.dx[r * cols + c], n.rstd * (g[c] - g_mean - n.xhat[c] * g_xhat_mean), mode);
    }
  }
  if (!grads.dgamma.empty()) detail::write_grads(grads.dgamma, dgamma, mode);
  if (!grads.dbeta.empty()) detail::write_grads(grads.dbeta, dbeta, mode);
}

std::vector<double> rms_norm_forward(std::size_t rows, std::size_t cols, std::span<const double> x,
                                     std::span<const double> gamma, double eps) {
  require_norm_args("rms_norm_forward", rows, cols, x, gamma, eps);
  std::vector<double> y(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const auto row = x.subspan(r * cols, cols);
    const double inv_rms = inverse_rms(row, eps);
    for (std::size_t c = 0; c < cols; ++c) y[r * cols + c] = row[c] * inv_rms * gamma[c];
  }
  return y;
}

// With g = dy * gamma and s = 1 / rms: dx = s * (g - x * s^2 * mean(g * x)).
void rms_norm_backward(std::size_t rows, std::size_t cols, std::span<const double> x,
                       std::span<const double> gamma, std::span<const double> dy, double eps,
                       const RmsNormGrads& grads, GradMode mode) {
  constexpr const char* kOp = "rms_norm_backward";
  require_norm_args(kOp, rows, cols, x, gamma, eps);
  require_size(kOp, "dy", dy.size(), rows * cols);
  require_size_or_empty(kOp, "dx", grads.dx.size(), rows * cols);
  require_size_or_empty(kOp, "dgamma", grads.dgamma.size(), cols);
  std::vector<double> dgamma(cols, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    const auto row = x.subspan(r * cols, cols);
    const auto dy_row = dy.subspan(r * cols, cols);
    const double inv_rms = inverse_rms(row, eps);
    double g_x_mean = 0.0;
    for (std::size_t c = 0; c < cols; ++c) {
      g_x_mean += dy_row[c] * gamma[c] * row[c];
      dgamma[c] += dy_row[c] * row[c] * inv_rms;
    }
    g_x_mean /= static_cast<double>(cols);
    if (grads.dx.empty()) continue;
    for (std::size_t c = 0; c < cols; ++c) {
      const double g = dy_row[c] * gamma[c];
      write_grad(grads.dx[r * cols + c], inv_rms * (g - row[c] * inv_rms * inv_rms * g_x_mean),
                 mode);
    }
  }
  if (!grads.dgamma.empty()) detail::write_grads(grads.dgamma, dgamma, mode);
}

}  // namespace resident::reference
