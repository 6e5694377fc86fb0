// The nn references' forwards against values worked out by hand or in closed form, and their
// defining properties: softmax rows sum to 1, the causal mask, LayerNorm / RMSNorm statistics,
// AdamW over two hand-computed steps, exact global-norm clipping, orthogonality and the variance
// of the initializers. (Finite differences only prove a backward consistent with its forward;
// these prove the forward itself.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numbers>
#include <random>
#include <vector>

#include "kernels/core/error.h"
#include "tests/reference/nn_reference.h"

namespace {

namespace ref = resident::reference;
using ref::GradMode;

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> uniform_values(std::size_t n, double low, double high, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(low, high);
  std::vector<double> values(n);
  for (double& v : values) v = uniform(rng);
  return values;
}

void expect_all_near(const std::vector<double>& actual, const std::vector<double>& expected,
                     double tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], tolerance) << "element " << i;
}

// ---------------------------------------------------------------------------------------------
// Linear

// x = [[1, 2], [3, -1]], W = [[1, 2], [3, 4], [5, 6]], b = [0.5, -0.5, 0]: small integers, so
// every product and sum is exact.
TEST(NnReferenceLinear, HandExample) {
  const ref::LinearShape shape{2, 2, 3};
  const std::vector<double> x = {1, 2, 3, -1};
  const std::vector<double> w = {1, 2, 3, 4, 5, 6};
  const std::vector<double> b = {0.5, -0.5, 0};
  EXPECT_EQ(ref::linear_forward(shape, x, w, b), (std::vector<double>{5.5, 10.5, 17, 1.5, 4.5, 9}));
  EXPECT_EQ(ref::linear_forward(shape, x, w, {}), (std::vector<double>{5, 11, 17, 1, 5, 9}));

  // dy picks output 0 of sample 0 and output 1 of sample 1.
  const std::vector<double> dy = {1, 0, 0, 0, 1, 0};
  std::vector<double> dx(4), dw(6), db(3);
  ref::linear_backward(shape, x, w, dy, {dx, dw, db}, GradMode::Overwrite);
  EXPECT_EQ(dx, (std::vector<double>{1, 2, 3, 4}));         // rows 0 and 1 of W
  EXPECT_EQ(dw, (std::vector<double>{1, 2, 3, -1, 0, 0}));  // x_0 into row 0, x_1 into row 1
  EXPECT_EQ(db, (std::vector<double>{1, 1, 0}));
}

TEST(NnReferenceLinear, RejectsMismatchedShapes) {
  const ref::LinearShape shape{2, 2, 3};
  const std::vector<double> x(4), w(6), short_bias(2);
  EXPECT_THROW(ref::linear_forward(shape, x, w, short_bias), resident::Error);
  EXPECT_THROW(ref::linear_forward(shape, std::vector<double>(5), w, {}), resident::Error);
  std::vector<double> dx(3);
  EXPECT_THROW(
      ref::linear_backward(shape, x, w, std::vector<double>(6), {dx, {}, {}}, GradMode::Overwrite),
      resident::Error);
}

// ---------------------------------------------------------------------------------------------
// Activations, in closed form.

TEST(NnReferenceActivations, ClosedFormValues) {
  const double ln2 = std::numbers::ln2;
  const double ln3 = std::log(3.0);
  EXPECT_EQ(ref::relu_forward(std::vector<double>{-1.5, 0.0, 2.0}), (std::vector<double>{0, 0, 2}));
  // tanh(ln 2) = (4 - 1) / (4 + 1)
  EXPECT_NEAR(ref::tanh_forward(std::vector<double>{ln2})[0], 0.6, 1e-15);
  // sigmoid(+-ln 3) = 3/4, 1/4; no overflow at +-800.
  expect_all_near(ref::sigmoid_forward(std::vector<double>{ln3, -ln3, 800.0, -800.0}),
                  {0.75, 0.25, 1.0, 0.0}, 1e-15);
  EXPECT_NEAR(ref::silu_forward(std::vector<double>{ln3})[0], 0.75 * ln3, 1e-15);
  // ELU(alpha 0.5): 0.5 (e^-ln2 - 1) = -0.25.
  expect_all_near(ref::elu_forward(std::vector<double>{-ln2, 2.0}, 0.5), {-0.25, 2.0}, 1e-15);
  // softplus(0) = ln 2 / beta; past the threshold the identity; no overflow below it.
  EXPECT_NEAR(ref::softplus_forward(std::vector<double>{0.0}, 1.0, 20.0)[0], ln2, 1e-15);
  EXPECT_NEAR(ref::softplus_forward(std::vector<double>{0.0}, 2.0, 20.0)[0], ln2 / 2, 1e-15);
  EXPECT_EQ(ref::softplus_forward(std::vector<double>{30.0}, 1.0, 20.0)[0], 30.0);
  EXPECT_EQ(ref::softplus_forward(std::vector<double>{800.0}, 1.0, 1000.0)[0], 800.0);
  EXPECT_EQ(ref::softplus_forward(std::vector<double>{-800.0}, 1.0, 20.0)[0], 0.0);
}

// The tanh approximation at 1 (the formula evaluated in Python's double math), and within
// 4.8e-4 of the exact GELU x Phi(x) everywhere on [-8, 8] (the approximation's known maximum
// error is 4.73e-4, near |x| = 2).
TEST(NnReferenceActivations, GeluTanhApproximatesExactGelu) {
  EXPECT_NEAR(ref::gelu_tanh_forward(std::vector<double>{1.0})[0], 0.8411919906082768, 1e-15);
  std::vector<double> x;
  for (int k = -800; k <= 800; ++k) x.push_back(k / 100.0);
  const auto y = ref::gelu_tanh_forward(x);
  double max_error = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double exact = 0.5 * x[i] * (1.0 + std::erf(x[i] / std::numbers::sqrt2));
    max_error = std::max(max_error, std::abs(y[i] - exact));
  }
  std::printf("GELU tanh approximation: max |error| vs x Phi(x) on [-8, 8] = %.3e\n", max_error);
  EXPECT_LE(max_error, 4.8e-4);
}

// Each kind dispatches to its named function with its own parameters.
TEST(NnReferenceActivations, DispatchMatchesTheNamedFunctions) {
  std::mt19937_64 rng(3);
  const auto x = uniform_values(11, -3.0, 3.0, rng);
  using K = ref::ActivationKind;
  EXPECT_EQ(ref::activation_forward({K::Identity}, x), x);
  EXPECT_EQ(ref::activation_forward({K::Relu}, x), ref::relu_forward(x));
  EXPECT_EQ(ref::activation_forward({K::Tanh}, x), ref::tanh_forward(x));
  EXPECT_EQ(ref::activation_forward({K::Sigmoid}, x), ref::sigmoid_forward(x));
  EXPECT_EQ(ref::activation_forward({K::Silu}, x), ref::silu_forward(x));
  EXPECT_EQ(ref::activation_forward({K::GeluTanh}, x), ref::gelu_tanh_forward(x));
  EXPECT_EQ(ref::activation_forward({K::Elu, 0.3}, x), ref::elu_forward(x, 0.3));
  EXPECT_EQ(ref::activation_forward({K::Softplus, 1.0, 2.0, 1.5}, x),
            ref::softplus_forward(x, 2.0, 1.5));
}

// a * sigmoid(b): [2 | 0] -> 1, [3 | ln 3] -> 2.25; rows are [a_0 a_1 | b_0 b_1].
TEST(NnReferenceActivations, GluSplitsTheLastDimensionInHalves) {
  const double ln3 = std::log(3.0);
  expect_all_near(ref::glu_forward(1, 2, std::vector<double>{2, 3, 0, ln3}), {1.0, 2.25}, 1e-15);
  EXPECT_THROW(ref::glu_forward(1, 2, std::vector<double>(3)), resident::Error);
}

TEST(NnReferenceDropout, KeptElementsAreScaledAndDroppedAreZero) {
  const std::vector<double> x = {1.0, -2.0, 3.0, 4.0};
  const std::vector<std::uint8_t> mask = {1, 0, 1, 0};
  EXPECT_EQ(ref::dropout_forward(x, mask, 0.5), (std::vector<double>{2.0, 0.0, 6.0, 0.0}));
  std::vector<double> dx(4);
  ref::dropout_backward(mask, 0.5, std::vector<double>{1, 1, 1, 1}, dx, GradMode::Overwrite);
  EXPECT_EQ(dx, (std::vector<double>{2.0, 0.0, 2.0, 0.0}));
  EXPECT_THROW(ref::dropout_forward(x, mask, 0.0), resident::Error);
  EXPECT_THROW(ref::dropout_forward(x, std::vector<std::uint8_t>{1, 2, 1, 0}, 0.5),
               resident::Error);
}

// ---------------------------------------------------------------------------------------------
// Normalizations

// With gamma = 1, beta = 0: each row has mean 0 and variance var / (var + eps), i.e. 1 up to eps.
TEST(NnReferenceLayerNorm, RowsHaveMeanZeroAndUnitVariance) {
  constexpr std::size_t kRows = 7, kCols = 13;
  constexpr double kEps = 1e-5;
  std::mt19937_64 rng(5);
  std::vector<double> x = uniform_values(kRows * kCols, 2.0, 8.0, rng);  // mean far from 0
  const auto y = ref::layer_norm_forward(kRows, kCols, x, std::vector<double>(kCols, 1.0),
                                         std::vector<double>(kCols, 0.0), kEps);
  double worst_mean = 0.0, worst_variance_error = 0.0;
  for (std::size_t r = 0; r < kRows; ++r) {
    double x_mean = 0.0, y_mean = 0.0;
    for (std::size_t c = 0; c < kCols; ++c) {
      x_mean += x[r * kCols + c] / kCols;
      y_mean += y[r * kCols + c] / kCols;
    }
    double x_var = 0.0, y_var = 0.0;
    for (std::size_t c = 0; c < kCols; ++c) {
      x_var += (x[r * kCols + c] - x_mean) * (x[r * kCols + c] - x_mean) / kCols;
      y_var += (y[r * kCols + c] - y_mean) * (y[r * kCols + c] - y_mean) / kCols;
    }
    worst_mean = std::max(worst_mean, std::abs(y_mean));
    worst_variance_error = std::max(worst_variance_error, std::abs(y_var - x_var / (x_var + kEps)));
    EXPECT_NEAR(y_var, 1.0, kEps);
  }
  std::printf("LayerNorm 7x13: max |row mean| %.2e, max |var - var/(var+eps)| %.2e (tol 1e-12)\n",
              worst_mean, worst_variance_error);
  EXPECT_LE(worst_mean, 1e-12);
  EXPECT_LE(worst_variance_error, 1e-12);
}

// x = [1, 2, 3]: mean 2, variance 2/3; y = (x - 2) / sqrt(2/3 + eps) * gamma + beta.
TEST(NnReferenceLayerNorm, HandExampleWithAffine) {
  constexpr double kEps = 1e-5;
  const double inv_std = 1.0 / std::sqrt(2.0 / 3.0 + kEps);
  const auto y =
      ref::layer_norm_forward(1, 3, std::vector<double>{1, 2, 3}, std::vector<double>{2, 1, -1},
                              std::vector<double>{0, 0.5, 1}, kEps);
  expect_all_near(y, {-2 * inv_std, 0.5, 1 - inv_std}, 1e-15);
  EXPECT_THROW(
      ref::layer_norm_forward(1, 3, std::vector<double>{1, 2, 3}, std::vector<double>{1, 1, 1},
                              std::vector<double>{0, 0, 0}, 0.0),
      resident::Error);
}

// x = [3, 4]: mean square 12.5; with gamma = 1 each row's mean square is ms / (ms + eps).
TEST(NnReferenceRmsNorm, HandExampleAndUnitMeanSquare) {
  constexpr double kEps = 1e-6;
  const double inv_rms = 1.0 / std::sqrt(12.5 + kEps);
  expect_all_near(
      ref::rms_norm_forward(1, 2, std::vector<double>{3, 4}, std::vector<double>{1, -2}, kEps),
      {3 * inv_rms, -8 * inv_rms}, 1e-15);

  constexpr std::size_t kRows = 5, kCols = 9;
  std::mt19937_64 rng(6);
  const auto x = uniform_values(kRows * kCols, -4.0, 4.0, rng);
  const auto y = ref::rms_norm_forward(kRows, kCols, x, std::vector<double>(kCols, 1.0), kEps);
  for (std::size_t r = 0; r < kRows; ++r) {
    double x_ms = 0.0, y_ms = 0.0;
    for (std::size_t c = 0; c < kCols; ++c) {
      x_ms += x[r * kCols + c] * x[r * kCols + c] / kCols;
      y_ms += y[r * kCols + c] * y[r * kCols + c] / kCols;
    }
    EXPECT_NEAR(y_ms, x_ms / (x_ms + kEps), 1e-12) << "row " << r;
  }
}

// ---------------------------------------------------------------------------------------------
// Softmax

// softmax([0, ln 2, ln 3]) = [1, 2, 3] / 6; large logits do not overflow.
TEST(NnReferenceSoftmax, ClosedFormValues) {
  const std::vector<double> x = {0.0, std::numbers::ln2, std::log(3.0)};
  expect_all_near(ref::softmax_forward(1, 3, x, ref::SoftmaxMask::None),
                  {1.0 / 6, 2.0 / 6, 3.0 / 6}, 1e-15);
  expect_all_near(ref::log_softmax_forward(1, 3, x, ref::SoftmaxMask::None),
                  {std::log(1.0 / 6), std::log(2.0 / 6), std::log(3.0 / 6)}, 1e-15);
  expect_all_near(
      ref::softmax_forward(1, 2, std::vector<double>{1000.0, 1000.0}, ref::SoftmaxMask::None),
      {0.5, 0.5}, 0.0);
}

TEST(NnReferenceSoftmax, RowsSumToOne) {
  constexpr std::size_t kRows = 7, kCols = 13;
  std::mt19937_64 rng(7);
  const auto x = uniform_values(kRows * kCols, -30.0, 30.0, rng);
  for (const auto mask : {ref::SoftmaxMask::None, ref::SoftmaxMask::Causal}) {
    const std::size_t rows = mask == ref::SoftmaxMask::Causal ? kCols : kRows;  // one [13, 13]
    const std::vector<double> scores(x.begin(),
                                     x.begin() + static_cast<std::ptrdiff_t>(rows * kCols));
    const auto y = ref::softmax_forward(rows, kCols, scores, mask);
    double worst = 0.0;
    for (std::size_t r = 0; r < rows; ++r) {
      double sum = 0.0;
      for (std::size_t c = 0; c < kCols; ++c) sum += y[r * kCols + c];
      worst = std::max(worst, std::abs(sum - 1.0));
    }
    std::printf("softmax %s: max |row sum - 1| = %.2e (tol 1e-14)\n",
                mask == ref::SoftmaxMask::Causal ? "causal 13x13" : "7x13", worst);
    EXPECT_LE(worst, 1e-14);
  }
}

// A stack of three [5, 5] score matrices: row r sees columns <= r % 5. Masked outputs are exact
// zeros (softmax) and -inf (log-softmax); masked inputs get exact zero gradients, whatever dy
// holds there.
TEST(NnReferenceSoftmax, CausalMaskHidesTheFuture) {
  constexpr std::size_t kT = 5, kRows = 3 * kT;
  std::mt19937_64 rng(8);
  const auto x = uniform_values(kRows * kT, -3.0, 3.0, rng);
  const auto dy = uniform_values(kRows * kT, -1.0, 1.0, rng);
  const auto y = ref::softmax_forward(kRows, kT, x, ref::SoftmaxMask::Causal);
  const auto log_y = ref::log_softmax_forward(kRows, kT, x, ref::SoftmaxMask::Causal);
  std::vector<double> dx(x.size()), d_log_x(x.size());
  ref::softmax_backward(kRows, kT, x, dy, ref::SoftmaxMask::Causal, dx, GradMode::Overwrite);
  ref::log_softmax_backward(kRows, kT, x, dy, ref::SoftmaxMask::Causal, d_log_x,
                            GradMode::Overwrite);
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t c = 0; c < kT; ++c) {
      const std::size_t i = r * kT + c;
      if (c > r % kT) {
        EXPECT_EQ(y[i], 0.0) << "row " << r << " col " << c;
        EXPECT_EQ(log_y[i], -kInf) << "row " << r << " col " << c;
        EXPECT_EQ(dx[i], 0.0) << "row " << r << " col " << c;
        EXPECT_EQ(d_log_x[i], 0.0) << "row " << r << " col " << c;
      } else {
        EXPECT_GT(y[i], 0.0) << "row " << r << " col " << c;
        EXPECT_NEAR(log_y[i], std::log(y[i]), 1e-15) << "row " << r << " col " << c;
      }
    }
    if (r % kT == 0) {
      EXPECT_EQ(y[r * kT], 1.0) << "row " << r << " sees only itself";
    }
  }
  // A visible row equals the unmasked softmax of its visible prefix.
  const auto prefix =
      ref::softmax_forward(1, 3, std::span(x).subspan(7 * kT, 3), ref::SoftmaxMask::None);
  expect_all_near({y.begin() + 7 * kT, y.begin() + 7 * kT + 3}, prefix, 1e-15);
  EXPECT_THROW(ref::softmax_forward(7, kT, std::vector<double>(7 * kT), ref::SoftmaxMask::Causal),
               resident::Error);
}

// ---------------------------------------------------------------------------------------------
// MLP

TEST(NnReferenceMlp, EqualsItsLayersComposed) {
  const std::vector<ref::MlpLayer> layers = {
      {4, 6, true, {ref::ActivationKind::Relu}},
      {6, 5, false, {ref::ActivationKind::Elu, 0.5}},
      {5, 2, true, {ref::ActivationKind::Identity}},
  };
  EXPECT_EQ(ref::mlp_parameter_count(layers), 4u * 6 + 6 + 6 * 5 + 5 * 2 + 2);
  constexpr std::size_t kBatch = 3;
  std::mt19937_64 rng(9);
  const auto params = uniform_values(ref::mlp_parameter_count(layers), -1.0, 1.0, rng);
  const auto x = uniform_values(kBatch * 4, -1.0, 1.0, rng);
  const std::span<const double> p(params);
  auto h = ref::activation_forward(
      layers[0].activation,
      ref::linear_forward({kBatch, 4, 6}, x, p.subspan(0, 24), p.subspan(24, 6)));
  h = ref::activation_forward(layers[1].activation,
                              ref::linear_forward({kBatch, 6, 5}, h, p.subspan(30, 30), {}));
  h = ref::linear_forward({kBatch, 5, 2}, h, p.subspan(60, 10), p.subspan(70, 2));
  EXPECT_EQ(ref::mlp_forward(layers, kBatch, params, x), h);

  const std::vector<ref::MlpLayer> broken = {{4, 6, true, {}}, {5, 2, true, {}}};
  EXPECT_THROW(
      ref::mlp_forward(broken, kBatch, std::vector<double>(ref::mlp_parameter_count(broken)), x),
      resident::Error);
}

// ---------------------------------------------------------------------------------------------
// Losses

TEST(NnReferenceLosses, MseHandExample) {
  const std::vector<double> prediction = {1, 2, 3}, target = {0, 2, 5};
  EXPECT_DOUBLE_EQ(ref::mse_loss(prediction, target), 5.0 / 3);
  std::vector<double> grad(3);
  ref::mse_loss_backward(prediction, target, 1.0, grad, GradMode::Overwrite);
  expect_all_near(grad, {2.0 / 3, 0.0, -4.0 / 3}, 1e-15);
}

// delta 1: h(0.5) = 0.125 (quadratic), h(3) = 3 - 0.5 = 2.5 (linear); weights 2 and 0.5;
// L = (2 * 0.125 + 0.5 * 2.5) / 2 = 0.75, dL/dp = [2 * 0.5, 0.5 * 1] / 2.
TEST(NnReferenceLosses, HuberHandExampleWithSampleWeights) {
  const std::vector<double> prediction = {0.5, 3.0}, target = {0.0, 0.0}, weights = {2.0, 0.5};
  EXPECT_DOUBLE_EQ(ref::huber_loss(2, 1, prediction, target, weights, 1.0), 0.75);
  EXPECT_DOUBLE_EQ(ref::huber_loss(2, 1, prediction, target, {}, 1.0), (0.125 + 2.5) / 2);
  std::vector<double> grad(2);
  ref::huber_loss_backward(2, 1, prediction, target, weights, 1.0, 1.0, grad, GradMode::Overwrite);
  expect_all_near(grad, {0.5, 0.25}, 1e-15);
}

// taus [0.1, 0.9]. Row 0: target 1 above both predictions (u = 1): 0.1 + 0.9. Row 1: target 0
// below both (u = -1): 0.9 + 0.1. L = 2 / 4; dL/dp = -(tau - 1[u < 0]) / 4.
TEST(NnReferenceLosses, PinballHandExample) {
  const std::vector<double> prediction = {0, 0, 1, 1}, target = {1, 0}, taus = {0.1, 0.9};
  EXPECT_DOUBLE_EQ(ref::pinball_loss(2, prediction, target, taus), 0.5);
  std::vector<double> grad(4);
  ref::pinball_loss_backward(2, prediction, target, taus, 1.0, grad, GradMode::Overwrite);
  expect_all_near(grad, {-0.025, -0.225, 0.225, 0.025}, 1e-15);
  EXPECT_THROW(ref::pinball_loss(2, prediction, target, std::vector<double>{0.1, 1.0}),
               resident::Error);
}

// p = [1, 2, 3] / 6 from logits [0, ln 2, ln 3]; uniform logits over 4 classes: entropy ln 4.
TEST(NnReferenceLosses, CategoricalHandExample) {
  const std::vector<double> logits = {0.0, std::numbers::ln2, std::log(3.0), 5, 5, 5, 5};
  const std::vector<double> p = {1.0 / 6, 2.0 / 6, 3.0 / 6};
  EXPECT_NEAR(
      ref::categorical_log_prob(1, 3, std::span(logits).first(3), std::vector<std::int32_t>{2})[0],
      std::log(0.5), 1e-15);
  EXPECT_NEAR(ref::categorical_entropy(1, 3, std::span(logits).first(3))[0],
              -(p[0] * std::log(p[0]) + p[1] * std::log(p[1]) + p[2] * std::log(p[2])), 1e-15);
  EXPECT_NEAR(ref::categorical_entropy(1, 4, std::span(logits).last(4))[0], std::log(4.0), 1e-15);
  std::vector<double> grad(3);
  ref::categorical_log_prob_backward(1, 3, std::span(logits).first(3), std::vector<std::int32_t>{2},
                                     std::vector<double>{1.0}, grad, GradMode::Overwrite);
  expect_all_near(grad, {-1.0 / 6, -2.0 / 6, 0.5}, 1e-15);
  EXPECT_THROW(
      ref::categorical_log_prob(1, 3, std::span(logits).first(3), std::vector<std::int32_t>{3}),
      resident::Error);
}

// ---------------------------------------------------------------------------------------------
// AdamW and clipping

// lr 0.1, betas (0.9, 0.999), eps 1e-8, weight decay 0.01; element 0 decays, element 1 does not.
// params [1, -2]; grads [0.5, -1] then [-0.25, 2].
TEST(NnReferenceAdamW, TwoStepsByHand) {
  const ref::AdamWConfig config{0.1, 0.9, 0.999, 1e-8, 0.01};
  std::vector<double> params = {1.0, -2.0}, m(2, 0.0), v(2, 0.0);
  const std::vector<std::uint8_t> decay = {1, 0};

  ref::adamw_step(config, 1, params, std::vector<double>{0.5, -1.0}, m, v, decay);
  // Step 1: m = 0.1 g, v = 0.001 g^2, so m_hat = g, v_hat = g^2: the step is lr * g / (|g| + eps).
  expect_all_near(m, {0.05, -0.1}, 1e-16);
  expect_all_near(v, {0.00025, 0.001}, 1e-17);
  const double p0_step1 = 1.0 * (1 - 0.1 * 0.01) - 0.1 * 0.5 / (0.5 + 1e-8);
  const double p1_step1 = -2.0 + 0.1 * 1.0 / (1.0 + 1e-8);
  expect_all_near(params, {p0_step1, p1_step1}, 1e-16);

  ref::adamw_step(config, 2, params, std::vector<double>{-0.25, 2.0}, m, v, decay);
  // Step 2: m = 0.9 m + 0.1 g, v = 0.999 v + 0.001 g^2; bias corrections 1 - 0.9^2 = 0.19 and
  // 1 - 0.999^2 = 0.001999.
  expect_all_near(m, {0.02, 0.11}, 1e-16);
  expect_all_near(v, {0.00031225, 0.004999}, 1e-17);
  const double p0_step2 =
      p0_step1 * (1 - 0.1 * 0.01) - 0.1 * (0.02 / 0.19) / (std::sqrt(0.00031225 / 0.001999) + 1e-8);
  const double p1_step2 = p1_step1 - 0.1 * (0.11 / 0.19) / (std::sqrt(0.004999 / 0.001999) + 1e-8);
  expect_all_near(params, {p0_step2, p1_step2}, 1e-15);
  // The same two steps in an independent Python implementation.
  expect_all_near(params, {0.8714672987058463, -1.9366103534720749}, 1e-15);

  EXPECT_THROW(ref::adamw_step(config, 0, params, std::vector<double>{0, 0}, m, v, decay),
               resident::Error);
}

TEST(NnReferenceClip, ScalesToTheMaxNormExactly) {
  std::mt19937_64 rng(10);
  auto grads = uniform_values(1001, -1.0, 1.0, rng);
  const double norm = ref::global_norm(grads);
  constexpr double kMaxNorm = 0.5;
  ASSERT_GT(norm, kMaxNorm);
  const auto before = grads;
  const double scale = ref::clip_global_norm(grads, kMaxNorm);
  EXPECT_DOUBLE_EQ(scale, kMaxNorm / norm);
  const double after = ref::global_norm(grads);
  // Exact up to the rounding of the two norms (1001 squares summed): 1e-14.
  std::printf("clip: norm %.6f -> %.17g (max norm 0.5), |error| %.2e (tol 1e-14)\n", norm, after,
              std::abs(after - kMaxNorm));
  EXPECT_NEAR(after, kMaxNorm, 1e-14);
  for (std::size_t i = 0; i < grads.size(); ++i) EXPECT_EQ(grads[i], before[i] * scale);
}

// Norm 0.5: untouched at a max norm of 0.5 or more, scaled by 0.4 / 0.5 just above it.
TEST(NnReferenceClip, ClipsOnlyAboveTheMaxNorm) {
  std::vector<double> grads = {0.3, -0.4};
  EXPECT_EQ(ref::clip_global_norm(grads, 0.5), 1.0);
  EXPECT_EQ(ref::clip_global_norm(grads, 10.0), 1.0);
  EXPECT_EQ(grads, (std::vector<double>{0.3, -0.4}));
  EXPECT_DOUBLE_EQ(ref::clip_global_norm(grads, 0.4), 0.8);
  expect_all_near(grads, {0.24, -0.32}, 1e-16);
  EXPECT_THROW(ref::clip_global_norm(grads, 0.0), resident::Error);
}

// ---------------------------------------------------------------------------------------------
// Initializers

// max |(Q^T Q or Q Q^T) - gain^2 I| over the orthonormal side.
double orthogonality_error(const std::vector<double>& w, std::size_t rows, std::size_t cols,
                           double gain) {
  const bool tall = rows >= cols;
  const std::size_t k = tall ? cols : rows;
  const std::size_t n = tall ? rows : cols;
  const auto element = [&](std::size_t vector, std::size_t e) {
    return tall ? w[e * cols + vector] : w[vector * cols + e];
  };
  double worst = 0.0;
  for (std::size_t a = 0; a < k; ++a) {
    for (std::size_t b = 0; b < k; ++b) {
      double dot = 0.0;
      for (std::size_t e = 0; e < n; ++e) dot += element(a, e) * element(b, e);
      worst = std::max(worst, std::abs(dot - (a == b ? gain * gain : 0.0)));
    }
  }
  return worst;
}

TEST(NnReferenceInit, OrthogonalIsOrthonormalTo1e12) {
  struct Case {
    std::size_t rows, cols;
    double gain;
  };
  for (const Case c : {Case{64, 32, 1.0}, Case{32, 64, 1.0}, Case{50, 50, 1.0}, Case{1, 1, 1.0},
                       Case{1, 7, 1.0}, Case{7, 1, 1.0}, Case{33, 17, 2.0}}) {
    std::mt19937_64 rng(11);
    std::vector<double> w(c.rows * c.cols);
    ref::init_orthogonal(w, c.rows, c.cols, c.gain, rng);
    const double error = orthogonality_error(w, c.rows, c.cols, c.gain);
    std::printf("orthogonal %zux%zu gain %.0f: max |Q^T Q - gain^2 I| = %.2e (tol 1e-12)\n", c.rows,
                c.cols, c.gain, error);
    EXPECT_LE(error, 1e-12) << c.rows << "x" << c.cols;
  }
}

// Sample mean and variance of `values`, each compared against its expectation in standard
// errors: SE(mean) = sqrt(var / n), SE(variance) = var * sqrt((kurtosis - 1) / n).
struct Moments {
  double mean = 0.0;
  double variance = 0.0;
};

Moments moments(const std::vector<double>& values) {
  Moments m;
  for (const double v : values) m.mean += v;
  m.mean /= static_cast<double>(values.size());
  for (const double v : values) m.variance += (v - m.mean) * (v - m.mean);
  m.variance /= static_cast<double>(values.size() - 1);
  return m;
}

constexpr double kUniformKurtosis = 1.8;
constexpr double kNormalKurtosis = 3.0;

// Checks mean 0 and the expected variance to 5 standard errors, and that the variance a
// plausible mistake would give is more than 5 standard errors away (the test can tell them apart).
void expect_variance(const char* what, const std::vector<double>& w, double expected_variance,
                     double mistaken_variance, double kurtosis) {
  const double n = static_cast<double>(w.size());
  const Moments m = moments(w);
  const double se_mean = std::sqrt(expected_variance / n);
  const double se_var = expected_variance * std::sqrt((kurtosis - 1.0) / n);
  const double z = (m.variance - expected_variance) / se_var;
  std::printf(
      "%-16s variance %.6e, expected %.6e: %+.2f SE (mistake %.3e at %.0f SE); mean %+.2f SE\n",
      what, m.variance, expected_variance, z, mistaken_variance,
      std::abs(m.variance - mistaken_variance) / se_var, m.mean / se_mean);
  EXPECT_LE(std::abs(m.mean), 5 * se_mean) << what;
  EXPECT_LE(std::abs(z), 5.0) << what;
  EXPECT_GT(std::abs(m.variance - mistaken_variance), 5 * se_var) << what;
}

// A [256, 1024] weight (262144 samples): fan_in 1024, fan_out 256. The mistake each is checked
// against: Xavier with fan_in alone (1 / fan_in), Kaiming with fan_out (gain^2 / fan_out).
TEST(NnReferenceInit, XavierAndKaimingVarianceWithinSamplingError) {
  constexpr std::size_t kOut = 256, kIn = 1024;
  const double xavier = 2.0 / (kIn + kOut);
  const double kaiming = 2.0 / kIn;  // gain sqrt(2)
  std::vector<double> w(kOut * kIn);
  std::mt19937_64 rng(12);
  ref::init_xavier_uniform(w, kOut, kIn, 1.0, rng);
  const double xavier_bound = std::sqrt(6.0 / (kIn + kOut));
  EXPECT_LE(*std::max_element(w.begin(), w.end()), xavier_bound);
  EXPECT_GE(*std::min_element(w.begin(), w.end()), -xavier_bound);
  expect_variance("xavier_uniform", w, xavier, 1.0 / kIn, kUniformKurtosis);
  ref::init_xavier_normal(w, kOut, kIn, 1.0, rng);
  expect_variance("xavier_normal", w, xavier, 1.0 / kIn, kNormalKurtosis);
  ref::init_kaiming_uniform(w, kOut, kIn, std::numbers::sqrt2, rng);
  expect_variance("kaiming_uniform", w, kaiming, 2.0 / kOut, kUniformKurtosis);
  ref::init_kaiming_normal(w, kOut, kIn, std::numbers::sqrt2, rng);
  expect_variance("kaiming_normal", w, kaiming, 2.0 / kOut, kNormalKurtosis);
}

// uniform(-1, 3): mean 1, variance 16 / 12; normal(2, 0.5). Checked as offsets from the mean.
TEST(NnReferenceInit, UniformAndNormalMomentsAndDeterminism) {
  std::vector<double> a(100000), b(100000);
  std::mt19937_64 rng_a(13), rng_b(13);
  ref::init_uniform(a, -1.0, 3.0, rng_a);
  ref::init_uniform(b, -1.0, 3.0, rng_b);
  EXPECT_EQ(a, b);  // same seed, same values
  EXPECT_GE(*std::min_element(a.begin(), a.end()), -1.0);
  EXPECT_LT(*std::max_element(a.begin(), a.end()), 3.0);
  for (double& v : a) v -= 1.0;
  expect_variance("uniform(-1, 3)", a, 16.0 / 12, 16.0 / 6, kUniformKurtosis);
  ref::init_normal(a, 2.0, 0.5, rng_a);
  for (double& v : a) v -= 2.0;
  expect_variance("normal(2, 0.5)", a, 0.25, 0.5, kNormalKurtosis);
}

}  // namespace
