// Loss kernels against the double-precision reference: MSE, Huber (with and without per-sample
// weights), pinball, the mean of a vector, and the categorical log-prob / entropy head, each
// value and gradient, gradients in both grad modes, at sizes that hit the reduction's edges
// (1, 31, 32, 33, one partial's 2048 terms +-1, 4097, and past the 1024-partial clamp) and the
// row groups' edges for the categorical head (cols 1, 3, 4|5, 8, 31, 32, 33, 1025, 4097, many
// rows). Fresh random inputs; loss values, gradients and scratch poisoned with NaN (overwrite)
// or random values (accumulate); d_loss = 0.75, so the upstream scale is exercised.
//
// Tolerances |gpu - ref| <= atol + rtol |ref|:
//   loss, mean           atol 1e-7, rtol 1e-5  (two-pass fp32 sum of non-negative terms:
//                        relative error ~(per-thread terms + 2 tree depths) * 6e-8)
//   loss gradients       atol 2e-7, rtol 1e-5  (a few fp32 roundings; accumulate adds one
//                        rounding of a value in [-1, 1])
//   log-prob, entropy    atol 5e-6, rtol 1e-5  (log of a row sum of exponentials, |value| <= ~9)
//   d_logits             atol 5e-6, rtol 1e-4
// Determinism: the same launches twice give bit-identical values and gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/nn/categorical.h"
#include "kernels/nn/losses.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "tests/nn/nn_test_support.h"
#include "tests/reference/nn_reference.h"
#include "tests/support/gpu.h"
#include "tests/support/param_name.h"

namespace {

using namespace resident;
using test::nn_support::bit_identical;
using test::nn_support::expect_close;
using test::nn_support::nans;
using test::nn_support::random_floats;
using test::nn_support::to_double;
using test::nn_support::Tolerance;

constexpr Tolerance kLoss{1e-7, 1e-5};
constexpr Tolerance kGrad{2e-7, 1e-5};
constexpr Tolerance kLogProb{5e-6, 1e-5};
constexpr Tolerance kEntropy{5e-6, 1e-5};
constexpr Tolerance kDLogits{5e-6, 1e-4};
constexpr float kDLoss = 0.75f;
constexpr float kDelta = 0.7f;

reference::GradMode reference_mode(nn::GradMode mode) {
  return mode == nn::GradMode::Accumulate ? reference::GradMode::Accumulate
                                          : reference::GradMode::Overwrite;
}

std::vector<float> initial(std::size_t n, nn::GradMode mode, std::mt19937_64& rng) {
  return mode == nn::GradMode::Accumulate ? random_floats(n, -1.0f, 1.0f, rng) : nans(n);
}

std::string label(const char* name, nn::GradMode mode) {
  return std::string(name) + (mode == nn::GradMode::Accumulate ? " acc" : "");
}

// One scalar loss: runs it twice into a NaN-poisoned value with NaN-poisoned partials, expects
// the same bits both times, and returns the value.
template <class Launch>
float run_loss_twice(std::size_t n, Stream& stream, Launch launch) {
  const std::size_t count = kernels::loss_partials_count(n);
  DeviceBuffer<float> d_loss(1), d_partials(count);
  std::vector<float> values[2];
  for (auto& value : values) {
    d_loss.upload(nans(1));
    d_partials.upload(nans(count));
    launch(d_loss.data(), d_partials.data(), count);
    stream.synchronize();
    value = d_loss.download();
  }
  EXPECT_TRUE(bit_identical(values[0], values[1])) << "loss differs between two runs";
  return values[0][0];
}

// One gradient in both modes against `reference(want, mode)`, and twice bit-identical.
template <class Launch, class Reference>
void check_gradient(std::size_t n, Stream& stream, std::mt19937_64& rng, const char* name,
                    Launch launch, Reference reference) {
  DeviceBuffer<float> d_grad(n);
  for (const nn::GradMode mode : {nn::GradMode::Overwrite, nn::GradMode::Accumulate}) {
    const std::vector<float> grad0 = initial(n, mode, rng);
    std::vector<float> runs[2];
    for (auto& run : runs) {
      d_grad.upload(grad0);
      launch(d_grad.data(), mode);
      stream.synchronize();
      run = d_grad.download();
    }
    EXPECT_TRUE(bit_identical(runs[0], runs[1])) << name << " differs between two runs";
    std::vector<double> want = to_double(grad0);
    reference(want, reference_mode(mode));
    ASSERT_NO_FATAL_FAILURE(expect_close(runs[0], want, kGrad, label(name, mode)));
  }
}

// ---------------------------------------------------------------------------------------------

class MseLossTest : public ::testing::TestWithParam<std::size_t> {};

TEST_P(MseLossTest, ValueAndGradientMatchTheReference) {
  RESIDENT_REQUIRE_GPU();
  const std::size_t n = GetParam();
  std::printf("  n %zu, %zu partials\n", n, kernels::loss_partials_count(n));
  std::mt19937_64 rng(n * 17 + 1);
  Stream stream;
  const std::vector<float> p = random_floats(n, -2.0f, 2.0f, rng),
                           t = random_floats(n, -2.0f, 2.0f, rng);
  const std::vector<double> pd = to_double(p), td = to_double(t);
  DeviceBuffer<float> d_p(n), d_t(n);
  d_p.upload(p);
  d_t.upload(t);
  const float loss = run_loss_twice(n, stream, [&](float* out, float* partials, std::size_t count) {
    kernels::launch_mse_loss(out, partials, count, d_p.data(), d_t.data(), n, stream.get());
  });
  ASSERT_NO_FATAL_FAILURE(expect_close(loss, reference::mse_loss(pd, td), kLoss, "mse loss"));
  check_gradient(
      n, stream, rng, "mse d_prediction",
      [&](float* grad, nn::GradMode mode) {
        kernels::launch_mse_loss_backward(grad, d_p.data(), d_t.data(), n, kDLoss, mode,
                                          stream.get());
      },
      [&](std::vector<double>& want, reference::GradMode mode) {
        reference::mse_loss_backward(pd, td, kDLoss, want, mode);
      });
}

INSTANTIATE_TEST_SUITE_P(EdgeSizes, MseLossTest,
                         ::testing::Values(1, 31, 32, 33, 2047, 2048, 2049, 4097, 3000001),
                         [](const auto& test_case) {
                           return test::param_name("n", test_case.param);
                         });

// ---------------------------------------------------------------------------------------------

struct HuberCase {
  std::size_t rows;
  std::size_t cols;
  bool weighted;
};

void PrintTo(const HuberCase& c, std::ostream* os) {
  *os << c.rows << "x" << c.cols << (c.weighted ? " weighted" : "");
}

class HuberLossTest : public ::testing::TestWithParam<HuberCase> {};

TEST_P(HuberLossTest, ValueAndGradientMatchTheReference) {
  RESIDENT_REQUIRE_GPU();
  const auto [rows, cols, weighted] = GetParam();
  const std::size_t n = rows * cols;
  std::printf("  rows %zu, cols %zu, %s, delta %.2f\n", rows, cols,
              weighted ? "weighted" : "unweighted", kDelta);
  std::mt19937_64 rng(rows * 1009 + cols * 3 + weighted);
  Stream stream;
  // |prediction - target| up to 4: both sides of delta.
  const std::vector<float> p = random_floats(n, -2.0f, 2.0f, rng),
                           t = random_floats(n, -2.0f, 2.0f, rng);
  const std::vector<float> w =
      weighted ? random_floats(rows, 0.01f, 1.0f, rng) : std::vector<float>{};
  const std::vector<double> pd = to_double(p), td = to_double(t), wd = to_double(w);
  DeviceBuffer<float> d_p(n), d_t(n), d_w(w.size());
  d_p.upload(p);
  d_t.upload(t);
  if (weighted) d_w.upload(w);
  const float* weights = weighted ? d_w.data() : nullptr;
  const float loss = run_loss_twice(n, stream, [&](float* out, float* partials, std::size_t count) {
    kernels::launch_huber_loss(out, partials, count, d_p.data(), d_t.data(), weights, rows, cols,
                               kDelta, stream.get());
  });
  ASSERT_NO_FATAL_FAILURE(
      expect_close(loss, reference::huber_loss(rows, cols, pd, td, wd, static_cast<double>(kDelta)),
                   kLoss, "huber loss"));
  check_gradient(
      n, stream, rng, "huber d_prediction",
      [&](float* grad, nn::GradMode mode) {
        kernels::launch_huber_loss_backward(grad, d_p.data(), d_t.data(), weights, rows, cols,
                                            kDelta, kDLoss, mode, stream.get());
      },
      [&](std::vector<double>& want, reference::GradMode mode) {
        reference::huber_loss_backward(rows, cols, pd, td, wd, static_cast<double>(kDelta), kDLoss,
                                       want, mode);
      });
}

INSTANTIATE_TEST_SUITE_P(EdgeSizes, HuberLossTest,
                         ::testing::Values(HuberCase{1, 1, false}, HuberCase{1, 1, true},
                                           HuberCase{31, 1, true}, HuberCase{32, 3, false},
                                           HuberCase{33, 2, true}, HuberCase{4097, 1, false},
                                           HuberCase{4097, 1, true}, HuberCase{1000, 17, true},
                                           HuberCase{262147, 4, false}, HuberCase{262147, 4, true}),
                         [](const auto& test_case) {
                           const HuberCase& c = test_case.param;
                           return test::param_name(
                               test::dims({c.rows, c.cols}),
                               test::flag(c.weighted, "weighted", "unweighted"));
                         });

// ---------------------------------------------------------------------------------------------

struct PinballCase {
  std::size_t rows;
  std::size_t quantiles;
};

void PrintTo(const PinballCase& c, std::ostream* os) { *os << c.rows << "x" << c.quantiles; }

class PinballLossTest : public ::testing::TestWithParam<PinballCase> {};

TEST_P(PinballLossTest, ValueAndGradientMatchTheReference) {
  RESIDENT_REQUIRE_GPU();
  const auto [rows, k] = GetParam();
  const std::size_t n = rows * k;
  std::printf("  rows %zu, quantiles %zu\n", rows, k);
  std::mt19937_64 rng(rows * 101 + k);
  Stream stream;
  const std::vector<float> p = random_floats(n, -2.0f, 2.0f, rng),
                           t = random_floats(rows, -2.0f, 2.0f, rng),
                           taus = random_floats(k, 0.05f, 0.95f, rng);
  const std::vector<double> pd = to_double(p), td = to_double(t), taud = to_double(taus);
  DeviceBuffer<float> d_p(n), d_t(rows), d_taus(k);
  d_p.upload(p);
  d_t.upload(t);
  d_taus.upload(taus);
  const float loss = run_loss_twice(n, stream, [&](float* out, float* partials, std::size_t count) {
    kernels::launch_pinball_loss(out, partials, count, d_p.data(), d_t.data(), d_taus.data(), rows,
                                 k, stream.get());
  });
  ASSERT_NO_FATAL_FAILURE(
      expect_close(loss, reference::pinball_loss(rows, pd, td, taud), kLoss, "pinball loss"));
  check_gradient(
      n, stream, rng, "pinball d_prediction",
      [&](float* grad, nn::GradMode mode) {
        kernels::launch_pinball_loss_backward(grad, d_p.data(), d_t.data(), d_taus.data(), rows, k,
                                              kDLoss, mode, stream.get());
      },
      [&](std::vector<double>& want, reference::GradMode mode) {
        reference::pinball_loss_backward(rows, pd, td, taud, kDLoss, want, mode);
      });
}

INSTANTIATE_TEST_SUITE_P(EdgeSizes, PinballLossTest,
                         ::testing::Values(PinballCase{1, 1}, PinballCase{31, 3},
                                           PinballCase{32, 5}, PinballCase{33, 1},
                                           PinballCase{4097, 9}, PinballCase{100003, 3}),
                         [](const auto& test_case) {
                           const PinballCase& c = test_case.param;
                           return test::param_name("rows", c.rows, "quantiles", c.quantiles);
                         });

// ---------------------------------------------------------------------------------------------

class MeanTest : public ::testing::TestWithParam<std::size_t> {};

TEST_P(MeanTest, MatchesTheDoubleMean) {
  RESIDENT_REQUIRE_GPU();
  const std::size_t n = GetParam();
  std::mt19937_64 rng(n * 3 + 7);
  Stream stream;
  const std::vector<float> v = random_floats(n, -1.0f, 1.0f, rng);
  double want = 0.0;
  for (const float x : v) want += x;
  want /= static_cast<double>(n);
  DeviceBuffer<float> d_v(n);
  d_v.upload(v);
  const float mean = run_loss_twice(n, stream, [&](float* out, float* partials, std::size_t count) {
    kernels::launch_mean(out, partials, count, d_v.data(), n, stream.get());
  });
  ASSERT_NO_FATAL_FAILURE(expect_close(mean, want, kLoss, "mean"));
}

INSTANTIATE_TEST_SUITE_P(EdgeSizes, MeanTest, ::testing::Values(1, 33, 2047, 2048, 2049, 3000001),
                         [](const auto& test_case) {
                           return test::param_name("n", test_case.param);
                         });

// ---------------------------------------------------------------------------------------------

struct CategoricalCase {
  std::size_t rows;
  std::size_t cols;
};

void PrintTo(const CategoricalCase& c, std::ostream* os) { *os << c.rows << "x" << c.cols; }

class CategoricalTest : public ::testing::TestWithParam<CategoricalCase> {};

TEST_P(CategoricalTest, LogProbAndEntropyMatchTheReference) {
  RESIDENT_REQUIRE_GPU();
  const auto [rows, cols] = GetParam();
  const std::size_t n = rows * cols;
  std::printf("  rows %zu, cols %zu\n", rows, cols);
  std::mt19937_64 rng(rows * 65537 + cols);
  Stream stream;
  std::vector<float> logits = random_floats(n, -3.0f, 3.0f, rng);
  for (std::size_t c = 0; c < cols; ++c) logits[c] += 100.0f;  // needs max-subtraction
  std::uniform_int_distribution<std::int32_t> action(0, static_cast<std::int32_t>(cols) - 1);
  std::vector<std::int32_t> actions(rows);
  for (std::int32_t& a : actions) a = action(rng);
  const std::vector<float> d_lp = random_floats(rows, -1.0f, 1.0f, rng);
  const std::vector<float> d_h = random_floats(rows, -1.0f, 1.0f, rng);
  const std::vector<double> xd = to_double(logits), d_lpd = to_double(d_lp), d_hd = to_double(d_h);
  DeviceBuffer<float> d_logits(n), d_log_prob(rows), d_entropy(rows), d_dlp(rows), d_dh(rows),
      d_grad(n);
  DeviceBuffer<std::int32_t> d_actions(rows);
  d_logits.upload(logits);
  d_actions.upload(actions);
  d_dlp.upload(d_lp);
  d_dh.upload(d_h);

  const std::vector<double> want_lp = reference::categorical_log_prob(rows, cols, xd, actions);
  const std::vector<double> want_h = reference::categorical_entropy(rows, cols, xd);
  d_log_prob.upload(nans(rows));
  d_entropy.upload(nans(rows));
  kernels::launch_categorical_forward(d_log_prob.data(), d_entropy.data(), d_logits.data(),
                                      d_actions.data(), rows, cols, stream.get());
  stream.synchronize();
  const std::vector<float> lp = d_log_prob.download(), h = d_entropy.download();
  ASSERT_NO_FATAL_FAILURE(expect_close(lp, want_lp, kLogProb, "log_prob"));
  ASSERT_NO_FATAL_FAILURE(expect_close(h, want_h, kEntropy, "entropy"));

  // Entropy alone (no actions), log-prob alone: the same bits as together.
  d_entropy.upload(nans(rows));
  kernels::launch_categorical_forward(nullptr, d_entropy.data(), d_logits.data(), nullptr, rows,
                                      cols, stream.get());
  d_log_prob.upload(nans(rows));
  kernels::launch_categorical_forward(d_log_prob.data(), nullptr, d_logits.data(), d_actions.data(),
                                      rows, cols, stream.get());
  stream.synchronize();
  EXPECT_TRUE(bit_identical(d_entropy.download(), h)) << "entropy alone";
  EXPECT_TRUE(bit_identical(d_log_prob.download(), lp)) << "log_prob alone";

  struct Upstream {
    bool log_prob;
    bool entropy;
    const char* name;
  };
  for (const Upstream up :
       {Upstream{true, false, "d_logits (log_prob)"}, Upstream{false, true, "d_logits (entropy)"},
        Upstream{true, true, "d_logits (both)"}}) {
    for (const nn::GradMode mode : {nn::GradMode::Overwrite, nn::GradMode::Accumulate}) {
      const std::vector<float> grad0 = initial(n, mode, rng);
      std::vector<float> runs[2];
      for (auto& run : runs) {
        d_grad.upload(grad0);
        kernels::launch_categorical_backward(
            d_grad.data(), d_logits.data(), d_actions.data(), up.log_prob ? d_dlp.data() : nullptr,
            up.entropy ? d_dh.data() : nullptr, rows, cols, mode, stream.get());
        stream.synchronize();
        run = d_grad.download();
      }
      EXPECT_TRUE(bit_identical(runs[0], runs[1])) << up.name << " differs between two runs";
      std::vector<double> want = to_double(grad0);
      reference::GradMode ref_mode = reference_mode(mode);
      if (up.log_prob) {
        reference::categorical_log_prob_backward(rows, cols, xd, actions, d_lpd, want, ref_mode);
        ref_mode = reference::GradMode::Accumulate;
      }
      if (up.entropy) reference::categorical_entropy_backward(rows, cols, xd, d_hd, want, ref_mode);
      ASSERT_NO_FATAL_FAILURE(expect_close(runs[0], want, kDLogits, label(up.name, mode)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EdgeSizes, CategoricalTest,
                         ::testing::Values(CategoricalCase{1, 1}, CategoricalCase{5, 3},
                                           CategoricalCase{7, 4}, CategoricalCase{6, 5},
                                           CategoricalCase{3, 8}, CategoricalCase{7, 31},
                                           CategoricalCase{3, 32}, CategoricalCase{3, 33},
                                           CategoricalCase{2, 1025}, CategoricalCase{2, 4097},
                                           CategoricalCase{10000, 4}, CategoricalCase{3000, 18}),
                         [](const auto& test_case) {
                           return test::dims({test_case.param.rows, test_case.param.cols});
                         });

TEST(CategoricalActionTest, AnActionOutOfRangeYieldsNaN) {
  RESIDENT_REQUIRE_GPU();
  Stream stream;
  const std::vector<float> logits = {0.1f, -0.4f, 0.7f, 1.0f, 2.0f, -1.0f};
  const std::vector<std::int32_t> actions = {1, 3};  // row 1: 3 is outside [0, 3)
  DeviceBuffer<float> d_logits(6), d_log_prob(2), d_grad(6), d_dlp(2);
  DeviceBuffer<std::int32_t> d_actions(2);
  d_logits.upload(logits);
  d_actions.upload(actions);
  d_dlp.upload(std::vector<float>{1.0f, 1.0f});
  kernels::launch_categorical_forward(d_log_prob.data(), nullptr, d_logits.data(), d_actions.data(),
                                      2, 3, stream.get());
  kernels::launch_categorical_backward(d_grad.data(), d_logits.data(), d_actions.data(),
                                       d_dlp.data(), nullptr, 2, 3, nn::GradMode::Overwrite,
                                       stream.get());
  stream.synchronize();
  const std::vector<float> lp = d_log_prob.download(), grad = d_grad.download();
  EXPECT_TRUE(std::isfinite(lp[0]));
  EXPECT_TRUE(std::isnan(lp[1]));
  for (int c = 0; c < 3; ++c) {
    EXPECT_TRUE(std::isfinite(grad[c])) << c;
    EXPECT_TRUE(std::isnan(grad[3 + c])) << c;
  }
}

// ---------------------------------------------------------------------------------------------
// Host-side checks and the partial count: these run without a GPU.

TEST(LossArgumentsTest, PartialsCountDependsOnNOnly) {
  EXPECT_EQ(kernels::loss_partials_count(0), 1u);
  EXPECT_EQ(kernels::loss_partials_count(1), 1u);
  EXPECT_EQ(kernels::loss_partials_count(2048), 1u);
  EXPECT_EQ(kernels::loss_partials_count(2049), 2u);
  EXPECT_EQ(kernels::loss_partials_count(2048 * 1024), 1024u);
  EXPECT_EQ(kernels::loss_partials_count(3000001), 1024u);
}

TEST(LossArgumentsTest, BadArgumentsThrowBeforeAnyLaunch) {
  float* const fake = reinterpret_cast<float*>(256);  // never dereferenced: the checks throw first
  EXPECT_THROW(kernels::launch_mse_loss(fake, fake, 1, fake, fake, 0, nullptr), Error);
  EXPECT_THROW(kernels::launch_mse_loss(fake, fake, 1, fake, fake, 2049, nullptr), Error);
  EXPECT_THROW(kernels::launch_mse_loss(fake, nullptr, 5, fake, fake, 10, nullptr), Error);
  EXPECT_THROW(kernels::launch_mse_loss_backward(fake, fake, fake, 0, 1.0f, nn::GradMode::Overwrite,
                                                 nullptr),
               Error);
  EXPECT_THROW(kernels::launch_huber_loss(fake, fake, 1, fake, fake, nullptr, 4, 4, 0.0f, nullptr),
               Error);
  EXPECT_THROW(kernels::launch_huber_loss_backward(fake, fake, fake, nullptr, 4, 4, -1.0f, 1.0f,
                                                   nn::GradMode::Overwrite, nullptr),
               Error);
  EXPECT_THROW(kernels::launch_pinball_loss(fake, fake, 1, fake, fake, fake, 3, 0, nullptr), Error);
  EXPECT_THROW(kernels::launch_mean(fake, fake, 1, fake, 0, nullptr), Error);
}

}  // namespace
