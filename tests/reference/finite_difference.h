// Central finite-difference gradient checks in double precision: the test that every reference
// backward (nn_reference.h) is the derivative of its forward.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace resident::reference {

// f: R^n -> R.
using ScalarFunction = std::function<double(std::span<const double> x)>;
// op: R^n -> R^m.
using VectorFunction = std::function<std::vector<double>(std::span<const double> x)>;
// The vector-Jacobian product of an op at x: the gradient of <upstream, op(x)> with respect to
// x, size n.
using VectorJacobianProduct =
    std::function<std::vector<double>(std::span<const double> x, std::span<const double> upstream)>;

struct FiniteDifferenceOptions {
  // Element i is perturbed by h_i = step * max(1, |x_i|), so the step stays above rounding at
  // large |x_i|.
  double step = 1e-6;
  // Relative error = |analytic - numeric| / max(|analytic|, |numeric|, relative_floor): the
  // floor keeps near-zero derivatives from turning rounding noise into a large relative error.
  double relative_floor = 1e-3;
};

struct GradientComparison {
  double max_abs_error = 0.0;
  double max_rel_error = 0.0;
  std::size_t worst_index = 0;     // the element with the largest relative error
  double analytic_at_worst = 0.0;  // the two gradients there
  double numeric_at_worst = 0.0;
};

// The central difference (f(x + h_i e_i) - f(x - h_i e_i)) / (2 h_i) for every i, the step
// taken as the difference of the two rounded arguments.
std::vector<double> central_difference_gradient(const ScalarFunction& f, std::span<const double> x,
                                                double step);

// Element-wise comparison of two gradients of the same size.
GradientComparison compare_gradients(std::span<const double> analytic,
                                     std::span<const double> numeric, double relative_floor);

// The analytic gradient of f at x against its central difference.
GradientComparison check_gradient(const ScalarFunction& f, std::span<const double> x,
                                  std::span<const double> analytic,
                                  const FiniteDifferenceOptions& options = {});

// The central difference of f(x) = <upstream, forward(x)> for every i, computed as
// <upstream, forward(x + h_i e_i) - forward(x - h_i e_i)> / (2 h_i): the outputs are subtracted
// before they are contracted, so outputs that x_i does not touch cancel exactly instead of adding
// rounding noise in proportion to |f| (which grows with the output size).
std::vector<double> central_difference_vjp(const VectorFunction& forward, std::span<const double> x,
                                           std::span<const double> upstream, double step);

// An op's backward against central_difference_vjp at a fixed random upstream gradient (uniform in
// [-1, 1], drawn from upstream_seed, the size of forward(x)).
GradientComparison check_backward(const VectorFunction& forward,
                                  const VectorJacobianProduct& backward, std::span<const double> x,
                                  std::uint64_t upstream_seed,
                                  const FiniteDifferenceOptions& options = {});

}  // namespace resident::reference
