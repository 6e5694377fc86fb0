// CPU tests of the Liquid CfC model (no GPU): the double reference's full-model backward (every
// parameter tensor and the input, the elapsed-time path included) against central finite
// differences, for the default and the pure cell, with ts = 1 and with uneven elapsed times; a
// negative control showing the check rejects a wrong backward; the GPU test's wide cases
// (cfc_test_cases.h) are well conditioned: moving every parameter by one float rounding moves the
// double prediction, loss and gradients by a small share of the GPU tolerance (and at a bound of
// 0.6 by far more than all of it); CfcConfig validation errors that name the field.
#include "tests/reference/cfc_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "lib/models/cfc/cfc_config.h"
#include "tests/models/cfc/cfc_test_cases.h"
#include "tests/reference/finite_difference.h"

namespace {

namespace ref = resident::reference;
using resident::models::CfcConfig;
using resident::models::CfcMode;
using resident::models::ModelShape;

std::vector<double> uniform_values(std::size_t n, double low, double high, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(low, high);
  std::vector<double> values(n);
  for (double& v : values) v = uniform(rng);
  return values;
}

std::size_t parameter_count(const ref::CfcDims& dims) {
  ref::CfcParams p = ref::cfc_zero_params(dims);
  std::size_t n = 0;
  for (const auto& [name, tensor] : ref::cfc_named_tensors(p)) n += tensor->size();
  return n;
}

ref::CfcParams unpack(const ref::CfcDims& dims, std::span<const double> flat) {
  ref::CfcParams p = ref::cfc_zero_params(dims);
  std::size_t at = 0;
  for (auto& [name, tensor] : ref::cfc_named_tensors(p))
    for (double& v : *tensor) v = flat[at++];
  return p;
}

std::vector<double> pack(ref::CfcParams& p) {
  std::vector<double> flat;
  for (auto& [name, tensor] : ref::cfc_named_tensors(p))
    flat.insert(flat.end(), tensor->begin(), tensor->end());
  return flat;
}

// [params | x]: weights U(-0.6, 0.6) (the backbone saturates partly; every head matters), A in
// [0.5, 1.5], w_tau away from its kink at 0; inputs U(-1.5, 1.5), the elapsed-time column (when
// there is one) uneven in [0.1, 2.5].
std::vector<double> packed_point(const ref::CfcDims& dims, std::size_t batch,
                                 std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  ref::CfcParams p = ref::cfc_zero_params(dims);
  for (auto& [name, tensor] : ref::cfc_named_tensors(p)) {
    *tensor = uniform_values(tensor->size(), -0.6, 0.6, rng);
    if (name == "A") *tensor = uniform_values(tensor->size(), 0.5, 1.5, rng);
    if (name == "w_tau")
      for (double& w : *tensor) w = (w < 0 ? -0.2 : 0.2) + w;
  }
  std::vector<double> packed = pack(p);
  std::vector<double> x = uniform_values(batch * dims.window * dims.features, -1.5, 1.5, rng);
  if (dims.time_column >= 0)
    for (std::size_t r = 0; r < batch * dims.window; ++r)
      x[r * dims.features + static_cast<std::size_t>(dims.time_column)] =
          uniform_values(1, 0.1, 2.5, rng)[0];
  packed.insert(packed.end(), x.begin(), x.end());
  return packed;
}

ref::GradientComparison check_model(const ref::CfcDims& dims, const ref::CfcDims& backward_dims,
                                    std::size_t batch, const std::vector<double>& packed) {
  const std::size_t count = parameter_count(dims);
  auto forward = [&](std::span<const double> v) {
    return ref::cfc_forward(dims, unpack(dims, v.first(count)), v.subspan(count), batch);
  };
  auto backward = [&](std::span<const double> v, std::span<const double> dy) {
    ref::CfcGradients g =
        ref::cfc_backward(backward_dims, unpack(dims, v.first(count)), v.subspan(count), batch, dy);
    std::vector<double> grad = pack(g.params);
    grad.insert(grad.end(), g.dx.begin(), g.dx.end());
    return grad;
  };
  return ref::check_backward(forward, backward, packed, /*upstream_seed=*/99);
}

struct GradCase {
  const char* name;
  ref::CfcDims dims;
  std::size_t batch;
};

ref::CfcDims dims_of(std::size_t window, std::size_t features, std::size_t outputs,
                     std::size_t hidden, std::size_t units, bool pure, long time_column) {
  ref::CfcDims d;
  d.window = window;
  d.features = features;
  d.outputs = outputs;
  d.hidden = hidden;
  d.units = units;
  d.pure = pure;
  d.time_column = time_column;
  return d;
}

const GradCase kGradCases[] = {
    {"default, ts = 1", dims_of(4, 3, 2, 5, 6, false, -1), 3},
    {"default, uneven ts in column 1", dims_of(5, 3, 2, 4, 7, false, 1), 2},
    {"default, L 1, batch 1", dims_of(1, 2, 1, 3, 4, false, -1), 1},
    {"pure, ts = 1", dims_of(4, 3, 2, 5, 6, true, -1), 3},
    {"pure, uneven ts in column 0", dims_of(5, 3, 1, 4, 5, true, 0), 2},
};

constexpr double kTolerance = 1e-6;  // on the max relative error (floor 1e-3)

TEST(CfcReference, FullModelBackwardMatchesFiniteDifferences) {
  for (const GradCase& c : kGradCases) {
    const std::vector<double> packed = packed_point(c.dims, c.batch, 11);
    const ref::GradientComparison r = check_model(c.dims, c.dims, c.batch, packed);
    std::printf("    %-34s %4zu values, max rel error %.2e (%5.1f%% of %.0e), max abs %.2e\n",
                c.name, packed.size(), r.max_rel_error, 100.0 * r.max_rel_error / kTolerance,
                kTolerance, r.max_abs_error);
    EXPECT_LE(r.max_rel_error, kTolerance)
        << c.name << ": worst element " << r.worst_index << " analytic " << r.analytic_at_worst
        << " numeric " << r.numeric_at_worst;
  }
}

TEST(CfcReference, GradientCheckRejectsAWrongBackward) {
  // Negative controls: a backward that ignores the elapsed-time column (ts = 1 in its formulas)
  // against a forward with uneven ts, for each cell.
  for (const std::size_t index : {std::size_t{1}, std::size_t{4}}) {
    const GradCase& c = kGradCases[index];
    const std::vector<double> packed = packed_point(c.dims, c.batch, 11);
    ref::CfcDims wrong = c.dims;
    wrong.time_column = -1;
    const ref::GradientComparison r = check_model(c.dims, wrong, c.batch, packed);
    std::printf("    %s, backward with ts = 1: max rel error %.2e\n", c.name, r.max_rel_error);
    EXPECT_GT(r.max_rel_error, 1e-2);
  }
}

TEST(CfcReference, ElapsedTimeChangesThePrediction) {
  // The same window with ts = 1 and with the uneven column as ts differ (the column is read).
  const GradCase& c = kGradCases[1];
  const std::vector<double> packed = packed_point(c.dims, c.batch, 11);
  const std::size_t count = parameter_count(c.dims);
  const ref::CfcParams p = unpack(c.dims, std::span<const double>(packed).first(count));
  const std::span<const double> x = std::span<const double>(packed).subspan(count);
  ref::CfcDims unit = c.dims;
  unit.time_column = -1;
  const std::vector<double> a = ref::cfc_forward(c.dims, p, x, c.batch);
  const std::vector<double> b = ref::cfc_forward(unit, p, x, c.batch);
  double diff = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::fabs(a[i] - b[i]));
  EXPECT_GT(diff, 1e-3);
}

TEST(CfcReference, RejectsBadDims) {
  ref::CfcDims d;
  d.time_column = 3;  // features = 3
  EXPECT_THROW(ref::cfc_zero_params(d), resident::Error);
  d.time_column = -2;
  EXPECT_THROW(ref::cfc_zero_params(d), resident::Error);
  d = ref::CfcDims{};
  d.hidden = 0;
  EXPECT_THROW(ref::cfc_zero_params(d), resident::Error);
}

// The largest |b - a| / (atol + rtol |a|) over the prediction, the MSE loss and every parameter
// gradient of one GPU-test case (the draws of cfc_test_cases.h with weight bound `gain`), a from
// its float-rounded parameters and b from those parameters each moved by one float epsilon
// (relative 2^-23, a random sign): how far fp32 rounding alone can move what the GPU test
// compares, in shares of its tolerance.
double rounding_sensitivity(const resident::test::CfcWideCase& c, double gain) {
  namespace rt = resident::test;
  const ref::CfcDims dims = rt::cfc_reference_dims(c.config, c.shape);
  std::mt19937_64 rng(c.seed);
  ref::CfcParams p = rt::cfc_random_params(dims, rng, gain);
  for (auto& [name, tensor] : ref::cfc_named_tensors(p))
    for (double& v : *tensor) v = static_cast<double>(static_cast<float>(v));
  const std::vector<double> x = rt::cfc_random_inputs(dims, c.batch, rng);
  const std::vector<double> target = rt::cfc_uniform(c.batch * dims.outputs, -1, 1, rng);
  auto evaluate = [&](ref::CfcParams& params) {
    const std::vector<double> pred = ref::cfc_forward(dims, params, x, c.batch);
    const double n = static_cast<double>(pred.size());
    double loss = 0.0;
    std::vector<double> dpred(pred.size());
    for (std::size_t i = 0; i < pred.size(); ++i) {
      loss += (pred[i] - target[i]) * (pred[i] - target[i]) / n;
      dpred[i] = 2.0 * (pred[i] - target[i]) / n;
    }
    ref::CfcGradients g = ref::cfc_backward(dims, params, x, c.batch, dpred);
    std::vector<double> all = pred;
    all.push_back(loss);
    const std::vector<double> grads = pack(g.params);
    all.insert(all.end(), grads.begin(), grads.end());
    return all;
  };
  ref::CfcParams q = p;
  std::mt19937_64 signs(c.seed + 1000);
  const double eps = std::ldexp(1.0, -23);
  for (auto& [name, tensor] : ref::cfc_named_tensors(q))
    for (double& v : *tensor) v *= (signs() & 1) != 0 ? 1.0 + eps : 1.0 - eps;
  const std::vector<double> a = evaluate(p), b = evaluate(q);
  double share = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    share = std::max(share, std::fabs(b[i] - a[i]) /
                                (rt::kCfcTestAtol + rt::kCfcTestRtol * std::fabs(a[i])));
  return share;
}

TEST(CfcTestCases, WideCasesAreWellConditioned) {
  for (const resident::test::CfcWideCase& c : resident::test::cfc_wide_cases()) {
    const double share = rounding_sensitivity(c, resident::test::kCfcTestWeightGain);
    std::printf("    %s, batch %zu, L %zu, F %zu, seed %llu: one rounding moves %.2e of the GPU "
                "tolerance\n",
                resident::models::describe_cfc(c.config, c.shape).c_str(), c.batch,
                c.shape.window, c.shape.features, static_cast<unsigned long long>(c.seed), share);
    EXPECT_LE(share, 0.05) << "seed " << c.seed;
  }
}

TEST(CfcTestCases, WideCaseAtBoundSixTenthsIsChaotic) {
  // Negative control: the first wide case with every weight U(-0.6, 0.6).
  const resident::test::CfcWideCase c = resident::test::cfc_wide_cases().front();
  const double share = rounding_sensitivity(c, std::numeric_limits<double>::infinity());
  std::printf("    bound 0.6: one rounding moves %.2e of the GPU tolerance\n", share);
  EXPECT_GT(share, 10.0);
}

std::string config_error(const CfcConfig& config, const ModelShape& shape) {
  try {
    resident::models::validate_cfc_config(config, shape);
  } catch (const resident::Error& e) {
    return e.what();
  }
  return "";
}

TEST(CfcConfig, DefaultsAreTheSmallConfig) {
  const CfcConfig c;
  EXPECT_EQ(c.hidden, 64u);
  EXPECT_EQ(c.units, 128u);
  EXPECT_EQ(c.mode, CfcMode::Default);
  EXPECT_EQ(c.time_column, -1);
  EXPECT_EQ(config_error(c, ModelShape{}), "");
  EXPECT_EQ(resident::models::cfc_mode_from_name("pure"), CfcMode::Pure);
  EXPECT_EQ(resident::models::cfc_mode_from_name("default"), CfcMode::Default);
  EXPECT_THROW(resident::models::cfc_mode_from_name("no_gate"), resident::Error);
}

TEST(CfcConfig, ErrorsNameTheField) {
  const ModelShape shape{64, 32, 1, 256};
  CfcConfig c;
  c.hidden = 0;
  EXPECT_NE(config_error(c, shape).find("hidden = 0"), std::string::npos) << config_error(c, shape);
  c = CfcConfig{};
  c.units = 5000;
  EXPECT_NE(config_error(c, shape).find("units = 5000"), std::string::npos);
  c = CfcConfig{};
  c.time_column = 32;
  EXPECT_NE(config_error(c, shape).find("time_column = 32"), std::string::npos);
  c = CfcConfig{};
  c.time_column = -2;
  EXPECT_NE(config_error(c, shape).find("time_column = -2"), std::string::npos);
  ModelShape bad = shape;
  bad.window = 0;
  EXPECT_NE(config_error(CfcConfig{}, bad).find("shape.window = 0"), std::string::npos);
  bad = shape;
  bad.max_batch = 0;
  EXPECT_NE(config_error(CfcConfig{}, bad).find("shape.max_batch = 0"), std::string::npos);
}

}  // namespace
