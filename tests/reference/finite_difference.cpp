#include "tests/reference/finite_difference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "tests/reference/nn_reference_checks.h"

namespace resident::reference {

using detail::require;
using detail::require_size;

namespace {

struct ElementError {
  double abs = 0.0;
  double rel = 0.0;
};

// Infinite when either side is not finite (a NaN gradient can never pass).
ElementError element_error(double analytic, double numeric, double relative_floor) {
  if (!std::isfinite(analytic) || !std::isfinite(numeric)) {
    const double infinity = std::numeric_limits<double>::infinity();
    return {infinity, infinity};
  }
  const double abs_error = std::abs(analytic - numeric);
  const double scale = std::max({std::abs(analytic), std::abs(numeric), relative_floor});
  return {abs_error, abs_error / scale};
}

// The perturbed arguments x_i + h_i and x_i - h_i, h_i = step * max(1, |x_i|).
struct Perturbation {
  double plus = 0.0;
  double minus = 0.0;
};

Perturbation perturb(double x, double step) {
  const double h = step * std::max(1.0, std::abs(x));
  return {x + h, x - h};
}

}  // namespace

std::vector<double> central_difference_gradient(const ScalarFunction& f, std::span<const double> x,
                                                double step) {
  require(step > 0.0, "central_difference_gradient", "step must be > 0");
  std::vector<double> point(x.begin(), x.end());
  std::vector<double> gradient(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const Perturbation p = perturb(x[i], step);
    point[i] = p.plus;
    const double f_plus = f(point);
    point[i] = p.minus;
    const double f_minus = f(point);
    point[i] = x[i];
    gradient[i] = (f_plus - f_minus) / (p.plus - p.minus);  // the rounded step, exactly
  }
  return gradient;
}

std::vector<double> central_difference_vjp(const VectorFunction& forward, std::span<const double> x,
                                           std::span<const double> upstream, double step) {
  require(step > 0.0, "central_difference_vjp", "step must be > 0");
  std::vector<double> point(x.begin(), x.end());
  std::vector<double> gradient(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const Perturbation p = perturb(x[i], step);
    point[i] = p.plus;
    const std::vector<double> y_plus = forward(point);
    point[i] = p.minus;
    const std::vector<double> y_minus = forward(point);
    point[i] = x[i];
    require_size("central_difference_vjp", "forward(x)", y_plus.size(), upstream.size());
    double contracted_difference = 0.0;
    for (std::size_t j = 0; j < upstream.size(); ++j)
      contracted_difference += upstream[j] * (y_plus[j] - y_minus[j]);
    gradient[i] = contracted_difference / (p.plus - p.minus);
  }
  return gradient;
}

GradientComparison compare_gradients(std::span<const double> analytic,
                                     std::span<const double> numeric, double relative_floor) {
  require_size("compare_gradients", "numeric", numeric.size(), analytic.size());
  require(relative_floor > 0.0, "compare_gradients", "relative_floor must be > 0");
  GradientComparison result;
  for (std::size_t i = 0; i < analytic.size(); ++i) {
    const ElementError error = element_error(analytic[i], numeric[i], relative_floor);
    result.max_abs_error = std::max(result.max_abs_error, error.abs);
    if (error.rel > result.max_rel_error) {
      result.max_rel_error = error.rel;
      result.worst_index = i;
      result.analytic_at_worst = analytic[i];
      result.numeric_at_worst = numeric[i];
    }
  }
  return result;
}

GradientComparison check_gradient(const ScalarFunction& f, std::span<const double> x,
                                  std::span<const double> analytic,
                                  const FiniteDifferenceOptions& options) {
  require_size("check_gradient", "analytic", analytic.size(), x.size());
  return compare_gradients(analytic, central_difference_gradient(f, x, options.step),
                           options.relative_floor);
}

GradientComparison check_backward(const VectorFunction& forward,
                                  const VectorJacobianProduct& backward, std::span<const double> x,
                                  std::uint64_t upstream_seed,
                                  const FiniteDifferenceOptions& options) {
  std::mt19937_64 rng(upstream_seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> upstream(forward(x).size());
  for (double& u : upstream) u = uniform(rng);
  const std::vector<double> analytic = backward(x, upstream);
  require_size("check_backward", "backward(x, upstream)", analytic.size(), x.size());
  return compare_gradients(analytic, central_difference_vjp(forward, x, upstream, options.step),
                           options.relative_floor);
}

}  // namespace resident::reference
