// CPU tests of the KAN model (no GPU): the double reference's full-model backward (every parameter
// tensor and the input) against central finite differences, the B-spline bases' partition of
// unity and their derivative against finite differences, the host local-recursion bases (the
// algorithm of the GPU kernels, kernels/models/kan/kan_bases.cuh) against the reference's
// Cox-de Boor recursion, the initial spline fit, the K-split rule, and KanConfig validation
// errors that name the field. Negative controls show the gradient check rejects a wrong backward.
#include "tests/reference/kan_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "lib/models/kan/kan_config.h"
#include "lib/models/kan/kan_init.h"
#include "tests/reference/finite_difference.h"

namespace {

namespace ref = resident::reference;
using resident::models::KanConfig;
using resident::models::ModelShape;

std::vector<double> uniform_values(std::size_t n, double low, double high, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(low, high);
  std::vector<double> values(n);
  for (double& v : values) v = uniform(rng);
  return values;
}

struct GradCase {
  const char* name;
  ref::KanSpec spec;
  std::size_t batch;
  double tolerance;  // on the max relative error (floor 1e-3)
};

// k = 3 bases are C^2, so central differences across a knot stay O(step^2); k = 2 bases are C^1
// (a jump of the second derivative at knots), hence the looser bound there.
const GradCase kGradCases[] = {
    {"tiny [6 -> 4 -> 3 -> 2], G 5, k 3", {{6, 4, 3, 2}, 5, 3, -1.0, 1.0}, 3, 1e-6},
    {"[5 -> 3 -> 2], G 7, k 2 on [-2, 1.5]", {{5, 3, 2}, 7, 2, -2.0, 1.5}, 2, 1e-4},
    {"[4 -> 3], G 3, k 5", {{4, 3}, 3, 5, -1.0, 1.0}, 1, 1e-6},
};

// [params | x], randomly filled: all tensors O(1) so the spline branch matters as much as the
// base branch; inputs wide enough that some saturate the squash.
std::vector<double> packed_point(const ref::KanSpec& spec, std::size_t batch, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> packed = uniform_values(ref::kan_parameter_count(spec), -0.8, 0.8, rng);
  const std::vector<double> x = uniform_values(batch * spec.widths.front(), -2.5, 2.5, rng);
  packed.insert(packed.end(), x.begin(), x.end());
  return packed;
}

ref::GradientComparison check_model(const ref::KanSpec& spec, const ref::KanSpec& backward_spec,
                                    std::size_t batch, const std::vector<double>& packed) {
  const std::size_t count = ref::kan_parameter_count(spec);
  auto forward = [&](std::span<const double> p) {
    return ref::kan_forward(spec, batch, p.first(count), p.subspan(count));
  };
  auto backward = [&](std::span<const double> p, std::span<const double> dy) {
    std::vector<double> grad(p.size(), std::numeric_limits<double>::quiet_NaN());
    std::span<double> g(grad);
    ref::kan_backward(backward_spec, batch, p.first(count), p.subspan(count), dy,
                      {g.subspan(count), g.first(count)}, ref::GradMode::Overwrite);
    return grad;
  };
  return ref::check_backward(forward, backward, packed, /*upstream_seed=*/99);
}

TEST(KanReference, FullModelBackwardMatchesFiniteDifferences) {
  for (const GradCase& c : kGradCases) {
    const std::vector<double> packed = packed_point(c.spec, c.batch, 11);
    const ref::GradientComparison r = check_model(c.spec, c.spec, c.batch, packed);
    std::printf("    %-40s %4zu values, max rel error %.2e (%5.1f%% of %.0e), max abs %.2e\n",
                c.name, packed.size(), r.max_rel_error, 100.0 * r.max_rel_error / c.tolerance,
                c.tolerance, r.max_abs_error);
    EXPECT_LE(r.max_rel_error, c.tolerance)
        << c.name << ": worst element " << r.worst_index << " analytic " << r.analytic_at_worst
        << " numeric " << r.numeric_at_worst;
  }
}

TEST(KanReference, GradientCheckRejectsAWrongBackward) {
  // Negative control: the backward of a different grid range (knots moved by 10%) against the
  // forward of the tiny case must fail the check.
  const GradCase& c = kGradCases[0];
  const std::vector<double> packed = packed_point(c.spec, c.batch, 11);
  ref::KanSpec wider = c.spec;
  wider.grid_max = 1.2;
  const ref::GradientComparison r = check_model(c.spec, wider, c.batch, packed);
  std::printf("    wrong grid range: max rel error %.2e\n", r.max_rel_error);
  EXPECT_GT(r.max_rel_error, 1e-2);
}

TEST(KanReference, BasesArePartitionOfUnityInsideTheGrid) {
  std::mt19937_64 rng(5);
  for (const GradCase& c : kGradCases) {
    const ref::KanSpec& spec = c.spec;
    std::vector<double> points = uniform_values(200, spec.grid_min, spec.grid_max, rng);
    points.push_back(spec.grid_min);
    points.push_back(spec.grid_max);
    const std::vector<double> knots = ref::kan_knots(spec);
    for (std::size_t m = spec.spline_order; m + spec.spline_order < knots.size(); ++m)
      points.push_back(knots[m]);  // the interior knots and both ends
    double worst = 0.0;
    for (const double x : points) {
      const std::vector<double> b = ref::bspline_bases(spec, x);
      ASSERT_EQ(b.size(), spec.grid_size + spec.spline_order);
      double sum = 0.0;
      std::size_t nonzero = 0;
      for (const double v : b) {
        EXPECT_GE(v, 0.0) << c.name << " x " << x;
        sum += v;
        nonzero += v != 0.0;
      }
      EXPECT_LE(nonzero, spec.spline_order + 1) << c.name << " x " << x;
      worst = std::max(worst, std::fabs(sum - 1.0));
    }
    std::printf("    %-40s max |sum - 1| %.2e over %zu points\n", c.name, worst, points.size());
    EXPECT_LE(worst, 1e-12) << c.name;
    // Outside the knot range every basis vanishes.
    for (const double x : {knots.front() - 0.01, knots.back() + 0.01, knots.back()})
      for (const double v : ref::bspline_bases(spec, x)) EXPECT_EQ(v, 0.0) << c.name << " x " << x;
  }
}

TEST(KanReference, BasisDerivativesMatchFiniteDifferences) {
  std::mt19937_64 rng(6);
  for (const GradCase& c : kGradCases) {
    const ref::KanSpec& spec = c.spec;
    const std::size_t nb = spec.grid_size + spec.spline_order;
    double worst = 0.0;
    for (const double x : uniform_values(100, spec.grid_min - 0.5, spec.grid_max + 0.5, rng)) {
      const double h = 1e-6;
      const std::vector<double> plus = ref::bspline_bases(spec, x + h);
      const std::vector<double> minus = ref::bspline_bases(spec, x - h);
      const std::vector<double> d = ref::bspline_basis_derivatives(spec, x);
      for (std::size_t m = 0; m < nb; ++m) {
        const double numeric = (plus[m] - minus[m]) / (2.0 * h);
        worst = std::max(worst, std::fabs(numeric - d[m]) / std::max(1.0, std::fabs(d[m])));
      }
    }
    std::printf("    %-40s max error of B' %.2e (%5.1f%% of 1e-5)\n", c.name, worst,
                100.0 * worst / 1e-5);
    EXPECT_LE(worst, 1e-5) << c.name;
  }
}

KanConfig config_of(const ref::KanSpec& spec) {
  KanConfig config;
  config.grid_size = spec.grid_size;
  config.spline_order = spec.spline_order;
  config.grid_min = spec.grid_min;
  config.grid_max = spec.grid_max;
  return config;
}

TEST(KanReference, KernelLocalRecursionMatchesCoxDeBoor) {
  // The uniform local recursion (what the GPU kernels evaluate, here in double) against the
  // reference's recursion on absolute knots, inside and outside the grid.
  std::mt19937_64 rng(8);
  for (const GradCase& c : kGradCases) {
    const KanConfig config = config_of(c.spec);
    const std::vector<double> knots = ref::kan_knots(c.spec);
    double worst = 0.0;
    for (const double x : uniform_values(300, knots.front() - 0.3, knots.back() + 0.3, rng)) {
      const std::vector<double> local = resident::models::kan_bases_at(config, x);
      const std::vector<double> want = ref::bspline_bases(c.spec, x);
      ASSERT_EQ(local.size(), want.size());
      for (std::size_t m = 0; m < want.size(); ++m)
        worst = std::max(worst, std::fabs(local[m] - want[m]));
    }
    std::printf("    %-40s max |local - Cox-de Boor| %.2e\n", c.name, worst);
    EXPECT_LE(worst, 1e-12) << c.name;
  }
}

TEST(KanReference, InitialSplineInterpolatesTheNoiseAtGridPoints) {
  for (const GradCase& c : kGradCases) {
    const KanConfig config = config_of(c.spec);
    const std::size_t points = config.grid_size + 1, nb = config.grid_size + config.spline_order;
    const std::vector<double> p = resident::models::kan_spline_fit_matrix(config);
    ASSERT_EQ(p.size(), nb * points);
    const double h = (config.grid_max - config.grid_min) / static_cast<double>(config.grid_size);
    double worst = 0.0;  // C P = I: the fit reproduces any noise at the grid points
    for (std::size_t j = 0; j < points; ++j) {
      const std::vector<double> b =
          ref::bspline_bases(c.spec, config.grid_min + static_cast<double>(j) * h);
      for (std::size_t q = 0; q < points; ++q) {
        double sum = 0.0;
        for (std::size_t m = 0; m < nb; ++m) sum += b[m] * p[m * points + q];
        worst = std::max(worst, std::fabs(sum - (j == q ? 1.0 : 0.0)));
      }
    }
    std::printf("    %-40s max |C P - I| %.2e\n", c.name, worst);
    EXPECT_LE(worst, 1e-10) << c.name;
  }
  // The default config's initial values: the sizes, the kaiming bound and the noise's scale.
  const KanConfig config;
  const std::vector<std::size_t> widths{6, 4, 2};
  const auto layers = resident::models::kan_initial_values(config, widths, 3);
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[0].spline_weight.size(), 4u * 6u * 8u);
  for (const float w : layers[0].base_weight) EXPECT_LE(std::fabs(w), 1.0 / std::sqrt(6.0));
  for (const float w : layers[0].spline_weight) EXPECT_LE(std::fabs(w), 0.1);
  EXPECT_EQ(resident::models::kan_initial_values(config, widths, 3)[1].spline_scaler,
            layers[1].spline_scaler)
      << "seeded";
}

TEST(KanConfig, KSplitRule) {
  const KanConfig config;  // max_k_splits 32, chunks >= 512
  EXPECT_EQ(resident::models::kan_k_splits(config, 2048 * 9, true), 32u);
  EXPECT_EQ(resident::models::kan_k_splits(config, 2048 * 9, false), 1u);
  EXPECT_EQ(resident::models::kan_k_splits(config, 64 * 9, true), 1u);
  EXPECT_EQ(resident::models::kan_k_splits(config, 256 * 9, true), 4u);
  EXPECT_EQ(
      resident::models::describe_kan(config, ModelShape{}),
      "kan [2048 -> 64 -> 32 -> 1], grid 5, order 3 on [-1, 1], tanh squash, K splits 32/1/1");
}

// The message of the Error that validate_kan_config throws, or "" when it accepts.
std::string validation_error(const KanConfig& config, const ModelShape& shape = {}) {
  try {
    resident::models::validate_kan_config(config, shape);
  } catch (const resident::Error& e) {
    return e.what();
  }
  return "";
}

TEST(KanConfig, ValidationNamesFieldValueAndRange) {
  EXPECT_EQ(validation_error(KanConfig{}), "");
  struct Bad {
    KanConfig config;
    ModelShape shape;
    const char* expected;
  };
  KanConfig grid0, order6, nan_min, max_le_min, width0, many_layers, splits0;
  grid0.grid_size = 0;
  order6.spline_order = 6;
  nan_min.grid_min = std::numeric_limits<double>::quiet_NaN();
  max_le_min.grid_max = -1.0;
  width0.hidden_widths = {64, 0};
  many_layers.hidden_widths = std::vector<std::size_t>(8, 4);
  splits0.max_k_splits = 0;
  ModelShape window0, batch0, huge;
  window0.window = 0;
  batch0.max_batch = 0;
  huge.window = 1 << 20;
  huge.features = 1 << 10;
  const Bad bad[] = {
      {grid0, {}, "grid_size = 0, allowed [1, 32]"},
      {order6, {}, "spline_order = 6, allowed [1, 5]"},
      {nan_min, {}, "grid_min = nan"},
      {max_le_min, {}, "grid_max = -1, allowed finite and > grid_min = -1"},
      {width0, {}, "hidden_widths[1] = 0, allowed [1, "},
      {many_layers, {}, "hidden_widths.size() = 8, allowed [0, 7]"},
      {splits0, {}, "max_k_splits = 0, allowed [1, 64]"},
      {KanConfig{}, window0, "shape.window = 0, allowed [1, "},
      {KanConfig{}, batch0, "shape.max_batch = 0, allowed [1, "},
      {KanConfig{}, huge, "shape.window * shape.features = 1073741824, allowed [1, "},
  };
  for (const Bad& b : bad) {
    const std::string message = validation_error(b.config, b.shape);
    EXPECT_NE(message.find(b.expected), std::string::npos)
        << "expected \"" << b.expected << "\" in \"" << message << "\"";
  }
}

}  // namespace
