// Helpers of the nn kit's GPU tests: seeded random inputs, NaN-poisoned outputs, the tolerance check |gpu - ref| <= atol +
// rtol * |ref| that prints the worst share of the tolerance used, and bitwise comparison.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/nn/activation.h"
#include "tests/reference/nn_reference.h"

namespace resident::test::nn_support {

// The hidden activations the fused-layer tests sweep, with the reference's name for each.
struct HiddenActivation {
  const char* name;
  kernels::ActivationKind kind;
  reference::ActivationKind reference_kind;
};
inline constexpr HiddenActivation kHiddenActivations[] = {
    {"relu", kernels::ActivationKind::Relu, reference::ActivationKind::Relu},
    {"tanh", kernels::ActivationKind::Tanh, reference::ActivationKind::Tanh},
    {"gelu_tanh", kernels::ActivationKind::GeluTanh, reference::ActivationKind::GeluTanh}};

struct Tolerance {
  double atol = 0.0;
  double rtol = 0.0;
};

inline std::vector<float> random_floats(std::size_t n, float low, float high,
                                        std::mt19937_64& rng) {
  std::uniform_real_distribution<float> value(low, high);
  std::vector<float> v(n);
  for (float& x : v) x = value(rng);
  return v;
}

inline std::vector<float> nans(std::size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Every element within tolerance; a non-finite reference (a masked -infinity) must be matched
// exactly. Fails on the first element out of tolerance; prints the worst share used.
inline void expect_close(const std::vector<float>& got, const std::vector<double>& want,
                         Tolerance tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0.0;
  std::size_t worst_index = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i];
    if (!std::isfinite(want[i])) {
      ASSERT_EQ(g, want[i]) << what << "[" << i << "]";
      continue;
    }
    const double allowed = tolerance.atol + tolerance.rtol * std::fabs(want[i]);
    const double error = std::fabs(g - want[i]);
    ASSERT_TRUE(error <= allowed) << what << "[" << i << "]: gpu " << got[i] << ", ref " << want[i]
                                  << ", error " << error << " > " << allowed << " (atol "
                                  << tolerance.atol << ", rtol " << tolerance.rtol << ")";
    if (allowed > 0.0 && error / allowed > worst) {
      worst = error / allowed;
      worst_index = i;
    }
  }
  std::printf("    %-22s %8zu values, worst %5.1f%% of tolerance (at %zu)\n", what.c_str(),
              got.size(), 100.0 * worst, worst_index);
}

inline void expect_close(float got, double want, Tolerance tolerance, const std::string& what) {
  expect_close(std::vector<float>{got}, std::vector<double>{want}, tolerance, what);
}

inline bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace resident::test::nn_support
