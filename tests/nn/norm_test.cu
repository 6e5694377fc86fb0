// LayerNorm and RMSNorm kernels against the double-precision reference: forward (y and the saved
// per-row statistics) and backward (dx, dgamma, dbeta in both grad modes, and with some gradients
// null), at row lengths that hit every row group and its edges (1, 2, 4|5, 16|17, 31, 32, 33,
// 1024|1025, 4097) and at row counts that hit the column-chunk edges (32|33 rows per chunk, many
// chunks, 1024 chunks). Fresh random x, gamma, beta, dy in [-2, 2] / [-1.5, 1.5] / [-1, 1] /
// [-1, 1]; outputs and scratch poisoned with NaN (overwrite) or random values (accumulate).
// eps = 1e-5 (as a float, passed to the reference as that float's double).
//
// Tolerances |gpu - ref| <= atol + rtol |ref| (fp32 row sums: relative error ~(per-thread terms +
// tree depth) * 6e-8; rstd <= 1 / sqrt(eps) ~ 316 scales dx's absolute error):
//   y                  atol 1e-5, rtol 1e-4
//   mean               atol 1e-6, rtol 1e-5
//   rstd               atol 0,    rtol 1e-5
//   dx                 atol 2e-5 * max(1, rstd_row), rtol 1e-4  (g - mean(g) - xhat mean(g xhat)
//                      cancels, and the row's rstd multiplies the error; LayerNorm only)
//   dgamma, dbeta      atol 1e-5 + 2e-7 * rows, rtol 1e-4  (fp32 sums over all rows, which may
//                      cancel to near 0; the error grows with the rows summed)
// Determinism: the same launches twice give bit-identical outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/nn/column_partials.h"
#include "kernels/nn/layer_norm.h"
#include "kernels/nn/rms_norm.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "tests/nn/nn_test_support.h"
#include "tests/reference/nn_reference.h"
#include "tests/support/gpu.h"
#include "tests/support/param_name.h"

namespace {

using namespace resident;
using test::nn_support::expect_close;
using test::nn_support::nans;
using test::nn_support::random_floats;
using test::nn_support::to_double;
using test::nn_support::Tolerance;

constexpr float kEps = 1e-5f;
constexpr Tolerance kY{1e-5, 1e-4};
constexpr Tolerance kMean{1e-6, 1e-5};
constexpr Tolerance kRstd{0.0, 1e-5};
constexpr Tolerance kDx{2e-5, 1e-4};

Tolerance param_tolerance(std::size_t rows) {
  return {1e-5 + 2e-7 * static_cast<double>(rows), 1e-4};
}

struct Case {
  std::size_t rows;
  std::size_t cols;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.rows << "x" << c.cols; }

reference::GradMode reference_mode(nn::GradMode mode) {
  return mode == nn::GradMode::Accumulate ? reference::GradMode::Accumulate
                                          : reference::GradMode::Overwrite;
}

// Per-row mean and 1 / sqrt(biased variance + eps), in double (the reference keeps them inside).
void layer_norm_statistics(const Case& c, const std::vector<double>& x, std::vector<double>& mean,
                           std::vector<double>& rstd) {
  mean.assign(c.rows, 0.0);
  rstd.assign(c.rows, 0.0);
  for (std::size_t r = 0; r < c.rows; ++r) {
    double sum = 0.0, squares = 0.0;
    for (std::size_t col = 0; col < c.cols; ++col) sum += x[r * c.cols + col];
    mean[r] = sum / static_cast<double>(c.cols);
    for (std::size_t col = 0; col < c.cols; ++col) {
      const double d = x[r * c.cols + col] - mean[r];
      squares += d * d;
    }
    rstd[r] = 1.0 / std::sqrt(squares / static_cast<double>(c.cols) + static_cast<double>(kEps));
  }
}

std::vector<double> rms_statistics(const Case& c, const std::vector<double>& x) {
  std::vector<double> rstd(c.rows);
  for (std::size_t r = 0; r < c.rows; ++r) {
    double squares = 0.0;
    for (std::size_t col = 0; col < c.cols; ++col)
      squares += x[r * c.cols + col] * x[r * c.cols + col];
    rstd[r] = 1.0 / std::sqrt(squares / static_cast<double>(c.cols) + static_cast<double>(kEps));
  }
  return rstd;
}

// Initial contents of a gradient buffer: NaN to overwrite, random values to accumulate into.
std::vector<float> initial(std::size_t n, nn::GradMode mode, std::mt19937_64& rng) {
  return mode == nn::GradMode::Accumulate ? random_floats(n, -1.0f, 1.0f, rng) : nans(n);
}

std::string label(const char* name, nn::GradMode mode) {
  return std::string(name) + (mode == nn::GradMode::Accumulate ? " acc" : "");
}

// dx of row r carries that row's rstd as a factor (up to 1 / sqrt(eps) ~ 316 for a row of
// nearly equal values, e.g. 3 columns): its absolute error scales with it. Compares dx / s_r
// with s_r = max(1, rstd_r) against kDx, i.e. |gpu - ref| <= kDx.atol * s_r + kDx.rtol |ref|.
void expect_close_per_row_rstd(const std::vector<float>& got, const std::vector<double>& want,
                               const std::vector<double>& rstd, std::size_t cols,
                               const std::string& what) {
  std::vector<float> got_scaled(got.size());
  std::vector<double> want_scaled(want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double s = std::max(1.0, rstd[i / cols]);
    got_scaled[i] = static_cast<float>(static_cast<double>(got[i]) / s);
    want_scaled[i] = want[i] / s;
  }
  expect_close(got_scaled, want_scaled, kDx, what + " / max(1, rstd)");
}

class NormTest : public ::testing::TestWithParam<Case> {};

TEST_P(NormTest, LayerNormMatchesTheReference) {
  RESIDENT_REQUIRE_GPU();
  const Case c = GetParam();
  const std::size_t n = c.rows * c.cols;
  std::printf("  rows %zu, cols %zu, %zu column chunks\n", c.rows, c.cols,
              kernels::column_chunks(c.rows));
  std::mt19937_64 rng(c.rows * 1000003 + c.cols);
  Stream stream;
  const std::vector<float> x = random_floats(n, -2.0f, 2.0f, rng);
  const std::vector<float> gamma = random_floats(c.cols, -1.5f, 1.5f, rng);
  const std::vector<float> beta = random_floats(c.cols, -1.0f, 1.0f, rng);
  const std::vector<float> dy = random_floats(n, -1.0f, 1.0f, rng);
  const std::vector<double> xd = to_double(x), gd = to_double(gamma), bd = to_double(beta),
                            dyd = to_double(dy);
  const double eps = static_cast<double>(kEps);
  DeviceBuffer<float> d_x(n), d_gamma(c.cols), d_beta(c.cols), d_dy(n), d_y(n), d_mean(c.rows),
      d_rstd(c.rows), d_dx(n), d_dgamma(c.cols), d_dbeta(c.cols);
  d_x.upload(x);
  d_gamma.upload(gamma);
  d_beta.upload(beta);
  d_dy.upload(dy);
  const std::size_t scratch_floats = kernels::layer_norm_backward_scratch_floats(c.rows, c.cols);
  DeviceBuffer<float> d_scratch(scratch_floats);

  // Forward without beta, then with (the saved statistics of the second feed the backward).
  d_y.upload(nans(n));
  kernels::launch_layer_norm_forward(d_y.data(), nullptr, nullptr, d_x.data(), d_gamma.data(),
                                     nullptr, c.rows, c.cols, kEps, stream.get());
  stream.synchronize();
  ASSERT_NO_FATAL_FAILURE(expect_close(
      d_y.download(),
      reference::layer_norm_forward(c.rows, c.cols, xd, gd, std::vector<double>(c.cols, 0.0), eps),
      kY, "y no beta"));

  d_y.upload(nans(n));
  d_mean.upload(nans(c.rows));
  d_rstd.upload(nans(c.rows));
  kernels::launch_layer_norm_forward(d_y.data(), d_mean.data(), d_rstd.data(), d_x.data(),
                                     d_gamma.data(), d_beta.data(), c.rows, c.cols, kEps,
                                     stream.get());
  stream.synchronize();
  std::vector<double> want_mean, want_rstd;
  layer_norm_statistics(c, xd, want_mean, want_rstd);
  ASSERT_NO_FATAL_FAILURE(expect_close(
      d_y.download(), reference::layer_norm_forward(c.rows, c.cols, xd, gd, bd, eps), kY, "y"));
  ASSERT_NO_FATAL_FAILURE(expect_close(d_mean.download(), want_mean, kMean, "mean"));
  ASSERT_NO_FATAL_FAILURE(expect_close(d_rstd.download(), want_rstd, kRstd, "rstd"));

  for (const nn::GradMode mode : {nn::GradMode::Overwrite, nn::GradMode::Accumulate}) {
    const std::vector<float> dx0 = initial(n, mode, rng), dgamma0 = initial(c.cols, mode, rng),
                             dbeta0 = initial(c.cols, mode, rng);
    d_dx.upload(dx0);
    d_dgamma.upload(dgamma0);
    d_dbeta.upload(dbeta0);
    d_scratch.upload(nans(scratch_floats));
    kernels::launch_layer_norm_backward(d_dx.data(), d_dgamma.data(), d_dbeta.data(),
                                        d_scratch.data(), scratch_floats, d_x.data(),
                                        d_gamma.data(), d_mean.data(), d_rstd.data(), d_dy.data(),
                                        c.rows, c.cols, mode, stream.get());
    stream.synchronize();
    std::vector<double> want_dx = to_double(dx0), want_dgamma = to_double(dgamma0),
                        want_dbeta = to_double(dbeta0);
    reference::layer_norm_backward(c.rows, c.cols, xd, gd, dyd, eps,
                                   {want_dx, want_dgamma, want_dbeta}, reference_mode(mode));
    ASSERT_NO_FATAL_FAILURE(expect_close_per_row_rstd(d_dx.download(), want_dx, want_rstd, c.cols,
                                                      label("dx", mode)));
    ASSERT_NO_FATAL_FAILURE(expect_close(d_dgamma.download(), want_dgamma, param_tolerance(c.rows),
                                         label("dgamma", mode)));
    ASSERT_NO_FATAL_FAILURE(expect_close(d_dbeta.download(), want_dbeta, param_tolerance(c.rows),
                                         label("dbeta", mode)));
  }

  // Null gradients are skipped: dx alone (no scratch needed), then dgamma alone.
  {
    d_dx.upload(nans(n));
    kernels::launch_layer_norm_backward(d_dx.data(), nullptr, nullptr, nullptr, 0, d_x.data(),
                                        d_gamma.data(), d_mean.data(), d_rstd.data(), d_dy.data(),
                                        c.rows, c.cols, nn::GradMode::Overwrite, stream.get());
    const std::vector<float> dbeta_before = random_floats(c.cols, -1.0f, 1.0f, rng);
    d_dgamma.upload(nans(c.cols));
    d_dbeta.upload(dbeta_before);
    kernels::launch_layer_norm_backward(nullptr, d_dgamma.data(), nullptr, d_scratch.data(),
                                        scratch_floats, d_x.data(), d_gamma.data(), d_mean.data(),
                                        d_rstd.data(), d_dy.data(), c.rows, c.cols,
                                        nn::GradMode::Overwrite, stream.get());
    stream.synchronize();
    std::vector<double> want_dx(n), want_dgamma(c.cols);
    reference::layer_norm_backward(c.rows, c.cols, xd, gd, dyd, eps, {want_dx, want_dgamma, {}},
                                   reference::GradMode::Overwrite);
    ASSERT_NO_FATAL_FAILURE(
        expect_close_per_row_rstd(d_dx.download(), want_dx, want_rstd, c.cols, "dx alone"));
    ASSERT_NO_FATAL_FAILURE(
        expect_close(d_dgamma.download(), want_dgamma, param_tolerance(c.rows), "dgamma alone"));
    EXPECT_TRUE(test::nn_support::bit_identical(d_dbeta.download(), dbeta_before)) << "dbeta touched";
  }
}

TEST_P(NormTest, RmsNormMatchesTheReference) {
  RESIDENT_REQUIRE_GPU();
  const Case c = GetParam();
  const std::size_t n = c.rows * c.cols;
  std::printf("  rows %zu, cols %zu, %zu column chunks\n", c.rows, c.cols,
              kernels::column_chunks(c.rows));
  std::mt19937_64 rng(c.rows * 7919 + c.cols * 13 + 1);
  Stream stream;
  const std::vector<float> x = random_floats(n, -2.0f, 2.0f, rng);
  const std::vector<float> gamma = random_floats(c.cols, -1.5f, 1.5f, rng);
  const std::vector<float> dy = random_floats(n, -1.0f, 1.0f, rng);
  const std::vector<double> xd = to_double(x), gd = to_double(gamma), dyd = to_double(dy);
  const double eps = static_cast<double>(kEps);
  DeviceBuffer<float> d_x(n), d_gamma(c.cols), d_dy(n), d_y(n), d_rstd(c.rows), d_dx(n),
      d_dgamma(c.cols);
  d_x.upload(x);
  d_gamma.upload(gamma);
  d_dy.upload(dy);
  const std::size_t scratch_floats = kernels::rms_norm_backward_scratch_floats(c.rows, c.cols);
  DeviceBuffer<float> d_scratch(scratch_floats);

  d_y.upload(nans(n));
  d_rstd.upload(nans(c.rows));
  kernels::launch_rms_norm_forward(d_y.data(), d_rstd.data(), d_x.data(), d_gamma.data(), c.rows,
                                   c.cols, kEps, stream.get());
  stream.synchronize();
  ASSERT_NO_FATAL_FAILURE(expect_close(
      d_y.download(), reference::rms_norm_forward(c.rows, c.cols, xd, gd, eps), kY, "y"));
  ASSERT_NO_FATAL_FAILURE(expect_close(d_rstd.download(), rms_statistics(c, xd), kRstd, "rstd"));

  for (const nn::GradMode mode : {nn::GradMode::Overwrite, nn::GradMode::Accumulate}) {
    const std::vector<float> dx0 = initial(n, mode, rng), dgamma0 = initial(c.cols, mode, rng);
    d_dx.upload(dx0);
    d_dgamma.upload(dgamma0);
    d_scratch.upload(nans(scratch_floats));
    kernels::launch_rms_norm_backward(d_dx.data(), d_dgamma.data(), d_scratch.data(),
                                      scratch_floats, d_x.data(), d_gamma.data(), d_rstd.data(),
                                      d_dy.data(), c.rows, c.cols, mode, stream.get());
    stream.synchronize();
    std::vector<double> want_dx = to_double(dx0), want_dgamma = to_double(dgamma0);
    reference::rms_norm_backward(c.rows, c.cols, xd, gd, dyd, eps, {want_dx, want_dgamma},
                                 reference_mode(mode));
    ASSERT_NO_FATAL_FAILURE(expect_close(d_dx.download(), want_dx, kDx, label("dx", mode)));
    ASSERT_NO_FATAL_FAILURE(expect_close(d_dgamma.download(), want_dgamma, param_tolerance(c.rows),
                                         label("dgamma", mode)));
  }

  // dx alone needs no scratch.
  d_dx.upload(nans(n));
  kernels::launch_rms_norm_backward(d_dx.data(), nullptr, nullptr, 0, d_x.data(), d_gamma.data(),
                                    d_rstd.data(), d_dy.data(), c.rows, c.cols,
                                    nn::GradMode::Overwrite, stream.get());
  stream.synchronize();
  std::vector<double> want_dx(n);
  reference::rms_norm_backward(c.rows, c.cols, xd, gd, dyd, eps, {want_dx, {}},
                               reference::GradMode::Overwrite);
  ASSERT_NO_FATAL_FAILURE(expect_close(d_dx.download(), want_dx, kDx, "dx alone"));
}

TEST_P(NormTest, Deterministic) {
  RESIDENT_REQUIRE_GPU();
  const Case c = GetParam();
  const std::size_t n = c.rows * c.cols;
  std::mt19937_64 rng(c.rows * 131 + c.cols);
  Stream stream;
  DeviceBuffer<float> d_x(n), d_gamma(c.cols), d_beta(c.cols), d_dy(n), d_y(n), d_mean(c.rows),
      d_rstd(c.rows), d_dx(n), d_dgamma(c.cols), d_dbeta(c.cols);
  d_x.upload(random_floats(n, -2.0f, 2.0f, rng));
  d_gamma.upload(random_floats(c.cols, -1.5f, 1.5f, rng));
  d_beta.upload(random_floats(c.cols, -1.0f, 1.0f, rng));
  d_dy.upload(random_floats(n, -1.0f, 1.0f, rng));
  const std::size_t scratch_floats = kernels::layer_norm_backward_scratch_floats(c.rows, c.cols);
  DeviceBuffer<float> d_scratch(scratch_floats);

  std::vector<std::vector<float>> runs[2];
  for (auto& run : runs) {
    for (DeviceBuffer<float>* b : {&d_y, &d_mean, &d_rstd, &d_dx, &d_dgamma, &d_dbeta})
      b->upload(nans(b->size()));
    kernels::launch_layer_norm_forward(d_y.data(), d_mean.data(), d_rstd.data(), d_x.data(),
                                       d_gamma.data(), d_beta.data(), c.rows, c.cols, kEps,
                                       stream.get());
    kernels::launch_layer_norm_backward(d_dx.data(), d_dgamma.data(), d_dbeta.data(),
                                        d_scratch.data(), scratch_floats, d_x.data(),
                                        d_gamma.data(), d_mean.data(), d_rstd.data(), d_dy.data(),
                                        c.rows, c.cols, nn::GradMode::Overwrite, stream.get());
    stream.synchronize();
    for (DeviceBuffer<float>* b : {&d_y, &d_mean, &d_rstd, &d_dx, &d_dgamma, &d_dbeta})
      run.push_back(b->download());
    kernels::launch_rms_norm_forward(d_y.data(), d_rstd.data(), d_x.data(), d_gamma.data(), c.rows,
                                     c.cols, kEps, stream.get());
    kernels::launch_rms_norm_backward(
        d_dx.data(), d_dgamma.data(), d_scratch.data(), scratch_floats, d_x.data(), d_gamma.data(),
        d_rstd.data(), d_dy.data(), c.rows, c.cols, nn::GradMode::Overwrite, stream.get());
    stream.synchronize();
    for (DeviceBuffer<float>* b : {&d_y, &d_rstd, &d_dx, &d_dgamma}) run.push_back(b->download());
  }
  const char* names[] = {"ln y",     "ln mean", "ln rstd",  "ln dx",  "ln dgamma",
                         "ln dbeta", "rms y",   "rms rstd", "rms dx", "rms dgamma"};
  ASSERT_EQ(runs[0].size(), std::size(names));
  for (std::size_t k = 0; k < runs[0].size(); ++k)
    EXPECT_TRUE(test::nn_support::bit_identical(runs[0][k], runs[1][k])) << names[k];
}

INSTANTIATE_TEST_SUITE_P(EdgeSizes, NormTest,
                         ::testing::Values(Case{1, 1}, Case{3, 2}, Case{2, 4}, Case{3, 5},
                                           Case{7, 16}, Case{4, 17}, Case{5, 31}, Case{32, 32},
                                           Case{33, 33}, Case{65, 31}, Case{3, 1024}, Case{2, 1025},
                                           Case{2, 4097}, Case{4099, 7}, Case{1000, 256},
                                           Case{40000, 3}),
                         [](const auto& test_case) {
                           return test::dims({test_case.param.rows, test_case.param.cols});
                         });

// Host-side checks and the chunking arithmetic: these run without a GPU.
TEST(NormArgumentsTest, ColumnChunksDependOnRowsOnly) {
  EXPECT_EQ(kernels::column_chunks(0), 1u);
  EXPECT_EQ(kernels::column_chunks(1), 1u);
  EXPECT_EQ(kernels::column_chunks(32), 1u);
  EXPECT_EQ(kernels::column_chunks(33), 2u);
  EXPECT_EQ(kernels::column_chunks(32 * 1024), 1024u);
  EXPECT_EQ(kernels::column_chunks(std::size_t{1} << 30), 1024u);
  EXPECT_EQ(kernels::column_chunk_rows(0), 1u);
  EXPECT_EQ(kernels::column_chunk_rows(33), 17u);
  EXPECT_EQ(kernels::column_chunk_rows(40000), 40u);
  for (const std::size_t rows : {1u, 31u, 33u, 65u, 4099u, 40000u, 1000000u})
    EXPECT_GE(kernels::column_chunks(rows) * kernels::column_chunk_rows(rows), rows) << rows;
  EXPECT_EQ(kernels::layer_norm_backward_scratch_floats(65, 10), 2u * 3u * 10u);
  EXPECT_EQ(kernels::rms_norm_backward_scratch_floats(65, 10), 3u * 10u);
}

TEST(NormArgumentsTest, BadArgumentsThrowBeforeAnyLaunch) {
  EXPECT_THROW(kernels::launch_layer_norm_forward(nullptr, nullptr, nullptr, nullptr, nullptr,
                                                  nullptr, 4, 4, 0.0f, nullptr),
               Error);
  EXPECT_THROW(
      kernels::launch_rms_norm_forward(nullptr, nullptr, nullptr, nullptr, 4, 4, -1e-5f, nullptr),
      Error);
  const std::size_t needed = kernels::layer_norm_backward_scratch_floats(100, 8);
  EXPECT_THROW(kernels::launch_layer_norm_backward(nullptr, nullptr, reinterpret_cast<float*>(16),
                                                   reinterpret_cast<float*>(16), needed - 1,
                                                   nullptr, nullptr, nullptr, nullptr, nullptr, 100,
                                                   8, nn::GradMode::Overwrite, nullptr),
               Error);
  EXPECT_THROW(kernels::launch_rms_norm_backward(nullptr, reinterpret_cast<float*>(16), nullptr,
                                                 1000, nullptr, nullptr, nullptr, nullptr, 100, 8,
                                                 nn::GradMode::Accumulate, nullptr),
               Error);
}

}  // namespace
