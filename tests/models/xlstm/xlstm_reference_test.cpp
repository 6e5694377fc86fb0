// CPU tests of the xLSTM model (no GPU): the double reference's full-model backward (every
// parameter tensor and the input) against central finite differences at several block layouts; a
// negative control showing the check rejects a backward without the forget gates' cumsum; the
// mLSTM cell's parallel stabilized form against the recurrent form and the naive form, and on long
// sequences with large gate pre-activations, where the naive form overflows and the stabilized
// one stays finite (and exact: h is a convex combination of the v rows there); XlstmConfig's
// defaults, validation errors naming the field, and its tensors against the reference's.
#include "tests/reference/xlstm_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "lib/models/xlstm/xlstm_config.h"
#include "tests/reference/finite_difference.h"

namespace {

namespace ref = resident::reference;

std::vector<double> uniform_values(std::size_t n, double low, double high, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(low, high);
  std::vector<double> values(n);
  for (double& v : values) v = uniform(rng);
  return values;
}

std::size_t parameter_count(const ref::XlstmDims& dims) {
  std::size_t n = 0;
  for (const auto& t : ref::xlstm_zero_params(dims).tensors) n += t.second.size();
  return n;
}

ref::XlstmParams unpack(const ref::XlstmDims& dims, std::span<const double> flat) {
  ref::XlstmParams p = ref::xlstm_zero_params(dims);
  std::size_t at = 0;
  for (auto& t : p.tensors)
    for (double& v : t.second) v = flat[at++];
  return p;
}

std::vector<double> pack(const ref::XlstmParams& p) {
  std::vector<double> flat;
  for (const auto& t : p.tensors) flat.insert(flat.end(), t.second.begin(), t.second.end());
  return flat;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// [params | x]: weights U(-0.5, 0.5); norm weights U(0.6, 1.4); gate and recurrent weights large
// enough that the gates differ per step (the stabilizer's max switches between its branches);
// q, k and up-projection weights U(-1.2, 1.2), so both branches of n_t = max(|r_t|, exp(-m_t))
// occur; inputs U(-1.5, 1.5).
std::vector<double> packed_point(const ref::XlstmDims& dims, std::size_t batch,
                                 std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  ref::XlstmParams p = ref::xlstm_zero_params(dims);
  for (auto& [name, tensor] : p.tensors) {
    if (ends_with(name, "norm.weight"))
      tensor = uniform_values(tensor.size(), 0.6, 1.4, rng);
    else if (ends_with(name, "gate.weight") || ends_with(name, "r.weight"))
      tensor = uniform_values(tensor.size(), -1.0, 1.0, rng);
    else if (ends_with(name, "q.weight") || ends_with(name, "k.weight") ||
             ends_with(name, "up.weight"))
      tensor = uniform_values(tensor.size(), -1.2, 1.2, rng);
    else if (ends_with(name, "gate.bias") || ends_with(name, ".bias"))
      tensor = uniform_values(tensor.size(), -1.5, 1.5, rng);
    else
      tensor = uniform_values(tensor.size(), -0.5, 0.5, rng);
  }
  std::vector<double> packed = pack(p);
  const std::vector<double> x =
      uniform_values(batch * dims.window * dims.features, -1.5, 1.5, rng);
  packed.insert(packed.end(), x.begin(), x.end());
  return packed;
}

ref::GradientComparison check_model(const ref::XlstmDims& dims,
                                    const ref::XlstmDims& backward_dims, std::size_t batch,
                                    const std::vector<double>& packed) {
  const std::size_t count = parameter_count(dims);
  auto forward = [&](std::span<const double> v) {
    return ref::xlstm_forward(dims, unpack(dims, v.first(count)), v.subspan(count), batch);
  };
  auto backward = [&](std::span<const double> v, std::span<const double> dy) {
    ref::XlstmGradients g = ref::xlstm_backward(backward_dims, unpack(dims, v.first(count)),
                                                v.subspan(count), batch, dy);
    std::vector<double> grad = pack(g.params);
    grad.insert(grad.end(), g.dx.begin(), g.dx.end());
    return grad;
  };
  // Step 1e-5: at 1e-6 the rounding noise of the model's O(1) outputs (1e-10 / 1e-6 relative
  // to a gradient at the 1e-3 floor) is as large as the tolerance; the truncation error at 1e-5
  // stays near 1e-10.
  ref::FiniteDifferenceOptions options;
  options.step = 1e-5;
  return ref::check_backward(forward, backward, packed, /*upstream_seed=*/99, options);
}

struct GradCase {
  const char* name;
  ref::XlstmDims dims;
  std::size_t batch;
};

ref::XlstmDims dims_of(std::size_t window, std::size_t blocks, long slstm_at, double eps) {
  ref::XlstmDims d;
  d.window = window;
  d.blocks = blocks;
  d.slstm_at = slstm_at;
  d.cell_eps = eps;
  return d;
}

const GradCase kGradCases[] = {
    {"mLSTM + sLSTM at 1, eps 0", dims_of(5, 2, 1, 0.0), 2},
    {"sLSTM at 0 of 3, eps 0", dims_of(6, 3, 0, 0.0), 2},
    {"mLSTM only, eps 0", dims_of(5, 2, -1, 0.0), 2},
    {"L 1, batch 1, eps 0", dims_of(1, 2, 1, 0.0), 1},
};

constexpr double kTolerance = 1e-6;  // on the max relative error (floor 1e-3)

TEST(XlstmReference, FullModelBackwardMatchesFiniteDifferences) {
  for (const GradCase& c : kGradCases) {
    const std::vector<double> packed = packed_point(c.dims, c.batch, 11);
    const ref::GradientComparison r = check_model(c.dims, c.dims, c.batch, packed);
    std::printf("    %-28s %4zu values, max rel error %.2e (%5.1f%% of %.0e), max abs %.2e\n",
                c.name, packed.size(), r.max_rel_error, 100.0 * r.max_rel_error / kTolerance,
                kTolerance, r.max_abs_error);
    EXPECT_LE(r.max_rel_error, kTolerance)
        << c.name << ": worst element " << r.worst_index << " analytic " << r.analytic_at_worst
        << " numeric " << r.numeric_at_worst;
  }
}

TEST(XlstmReference, ConstantMBackwardIsWithinEpsOfTheGradientAtCellEps1e6) {
  // At cell_eps = 1e-6 (the GPU's) h depends on m through eps alone: the constant-m backward is
  // off by O(eps) relative, far below float precision.
  const ref::XlstmDims dims = dims_of(5, 2, 1, 1e-6);
  const std::vector<double> packed = packed_point(dims, 2, 11);
  const ref::GradientComparison r = check_model(dims, dims, 2, packed);
  std::printf("    eps 1e-6: max rel error %.2e\n", r.max_rel_error);
  EXPECT_LE(r.max_rel_error, 1e-5);
}

TEST(XlstmReference, GradientCheckRejectsAWrongBackward) {
  const GradCase& c = kGradCases[0];
  const std::vector<double> packed = packed_point(c.dims, c.batch, 11);
  ref::XlstmDims wrong = c.dims;
  wrong.control_skip_forget_cumsum = true;
  const ref::GradientComparison r = check_model(c.dims, wrong, c.batch, packed);
  std::printf("    backward without the forget gates' cumulative sum: max rel error %.2e\n",
              r.max_rel_error);
  EXPECT_GT(r.max_rel_error, 1e-2);
}

struct CellInputs {
  std::vector<double> q, k, v, ig, fg;
};

CellInputs cell_inputs(std::size_t L, std::size_t DH, double ig_low, double ig_high,
                       double fg_low, double fg_high, bool positive_qk, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double low = positive_qk ? 0.5 : -1.0;
  CellInputs in;
  in.q = uniform_values(L * DH, low, 1.0, rng);
  in.k = uniform_values(L * DH, low, 1.0, rng);
  in.v = uniform_values(L * DH, positive_qk ? 0.1 : -1.0, 1.0, rng);
  in.ig = uniform_values(L, ig_low, ig_high, rng);
  in.fg = uniform_values(L, fg_low, fg_high, rng);
  return in;
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(a[i] - b[i]) / std::max(1e-3, std::fabs(b[i])));
  return worst;
}

TEST(XlstmCell, ParallelStabilizedEqualsRecurrentAndNaiveAtModerateGates) {
  const std::size_t L = 40, DH = 6;
  const CellInputs in = cell_inputs(L, DH, -2.0, 2.0, -1.0, 4.0, false, 3);
  const auto parallel = ref::mlstm_cell_parallel(L, DH, in.q, in.k, in.v, in.ig, in.fg, 1e-6);
  const auto recurrent = ref::mlstm_cell_recurrent(L, DH, in.q, in.k, in.v, in.ig, in.fg, 1e-6);
  const auto naive = ref::mlstm_cell_naive(L, DH, in.q, in.k, in.v, in.ig, in.fg, 1e-6);
  EXPECT_LE(max_rel_diff(parallel, recurrent), 1e-10);
  // The naive form's n_t = max(|r_t|, 1) equals the stabilized one's only where |r_t| wins.
  EXPECT_LE(max_rel_diff(parallel, naive), 1e-4);
}

TEST(XlstmCell, StabilizedStaysFiniteWhereNaiveOverflows) {
  // L = 2048 steps, input-gate pre-activations in [703, 708] (exp of each is finite in double,
  // 1e305..2e307), forget gates near 1 (f~ in [8, 12]), q, k, v positive: the naive form's
  // weighted sums pass the double range (1.8e308) and h turns inf / inf = NaN. The stabilized
  // form's exp arguments are all <= 0; with q.k > 0 every weight C_ts is positive and n_t = r_t,
  // so h_t is a convex combination of v_0..v_t shrunk by r_t / (r_t + eps): finite and inside
  // [min v, max v] per column up to eps.
  const std::size_t L = 2048, DH = 4;
  const CellInputs in = cell_inputs(L, DH, 703.0, 708.0, 8.0, 12.0, true, 5);
  const auto naive = ref::mlstm_cell_naive(L, DH, in.q, in.k, in.v, in.ig, in.fg, 1e-6);
  const auto stable = ref::mlstm_cell_parallel(L, DH, in.q, in.k, in.v, in.ig, in.fg, 1e-6);
  std::size_t naive_bad = 0, stable_bad = 0, outside = 0;
  for (double h : naive) naive_bad += std::isfinite(h) ? 0 : 1;
  std::vector<double> lo(DH, 1e300), hi(DH, -1e300);
  for (std::size_t t = 0; t < L; ++t)
    for (std::size_t j = 0; j < DH; ++j) {
      lo[j] = std::min(lo[j], in.v[t * DH + j]);
      hi[j] = std::max(hi[j], in.v[t * DH + j]);
      const double h = stable[t * DH + j];
      stable_bad += std::isfinite(h) ? 0 : 1;
      outside += (h >= lo[j] - 1e-5 && h <= hi[j] + 1e-5) ? 0 : 1;
    }
  std::printf("    L %zu, i~ in [703, 708]: naive %zu of %zu values not finite, stabilized %zu\n",
              L, naive_bad, naive.size(), stable_bad);
  EXPECT_GT(naive_bad, 0u);
  EXPECT_EQ(stable_bad, 0u);
  EXPECT_EQ(outside, 0u);
  // The recurrent form (stabilized step by step) agrees on the long sequence too.
  const auto recurrent = ref::mlstm_cell_recurrent(L, DH, in.q, in.k, in.v, in.ig, in.fg, 1e-6);
  EXPECT_LE(max_rel_diff(stable, recurrent), 1e-8);
}

TEST(XlstmReference, RejectsBadDims) {
  ref::XlstmDims d;
  d.heads = 3;  // d_model 8
  EXPECT_THROW(ref::xlstm_zero_params(d), resident::Error);
  d = ref::XlstmDims{};
  d.inner = 18;
  EXPECT_THROW(ref::xlstm_zero_params(d), resident::Error);
  d = ref::XlstmDims{};
  d.slstm_at = 2;
  EXPECT_THROW(ref::xlstm_zero_params(d), resident::Error);
  d = ref::XlstmDims{};
  d.window = 0;
  EXPECT_THROW(ref::xlstm_zero_params(d), resident::Error);
}

using resident::models::ModelShape;
using resident::models::XlstmConfig;

std::string config_error(const XlstmConfig& config, const ModelShape& shape) {
  try {
    resident::models::validate_xlstm_config(config, shape);
  } catch (const resident::Error& e) {
    return e.what();
  }
  return "";
}

TEST(XlstmConfig, DefaultsAreTheSmallConfig) {
  const XlstmConfig c;
  EXPECT_EQ(c.d_model, 64u);
  EXPECT_EQ(c.heads, 4u);
  EXPECT_EQ(c.inner(), 128u);
  EXPECT_EQ(c.mlstm_head_dim(), 32u);
  EXPECT_EQ(c.blocks, 4u);
  EXPECT_EQ(c.slstm_at, 1);
  EXPECT_EQ(c.ffn(), 128u);
  EXPECT_EQ(config_error(c, ModelShape{}), "");
  EXPECT_EQ(resident::models::describe_xlstm(c),
            "xlstm D=64 NH=4 Di=128 blocks 4 (sLSTM at 1) FFN 128");
}

TEST(XlstmConfig, ErrorsNameTheField) {
  const ModelShape shape{64, 32, 1, 256};
  XlstmConfig c;
  c.heads = 3;
  EXPECT_NE(config_error(c, shape).find("d_model = 64"), std::string::npos)
      << config_error(c, shape);
  c = XlstmConfig{};
  c.slstm_at = 4;
  EXPECT_NE(config_error(c, shape).find("slstm_at = 4"), std::string::npos);
  c = XlstmConfig{};
  c.conv_kernel = 9;
  EXPECT_NE(config_error(c, shape).find("conv_kernel = 9"), std::string::npos);
  c = XlstmConfig{};
  c.heads = 1;  // sLSTM head dim 64 > 32
  EXPECT_NE(config_error(c, shape).find("d_model / heads = 64"), std::string::npos);
  ModelShape bad = shape;
  bad.window = 1024;  // the cell's window does not fit in shared memory
  EXPECT_NE(config_error(XlstmConfig{}, bad).find("shape.window = 1024"), std::string::npos);
  bad = shape;
  bad.max_batch = 0;
  EXPECT_NE(config_error(XlstmConfig{}, bad).find("shape.max_batch = 0"), std::string::npos);
  EXPECT_EQ(config_error(XlstmConfig{}, ModelShape{128, 32, 1, 256}), "");  // L 128 fits
}

TEST(XlstmConfig, TensorsMatchTheReference) {
  for (const long slstm_at : {-1L, 0L, 1L}) {
    XlstmConfig c;
    c.slstm_at = slstm_at;
    const ModelShape shape{64, 32, 3, 256};
    ref::XlstmDims d;
    d.window = 64;
    d.features = 32;
    d.outputs = 3;
    d.d_model = c.d_model;
    d.heads = c.heads;
    d.inner = c.inner();
    d.ffn = c.ffn();
    d.blocks = c.blocks;
    d.slstm_at = slstm_at;
    const auto specs = resident::models::xlstm_tensor_specs(c, shape);
    const auto shapes = ref::xlstm_tensor_shapes(d);
    ASSERT_EQ(specs.size(), shapes.size());
    for (std::size_t i = 0; i < specs.size(); ++i) {
      EXPECT_EQ(specs[i].name, shapes[i].name);
      EXPECT_EQ(specs[i].shape, shapes[i].shape) << specs[i].name;
    }
    const auto values = resident::models::xlstm_initial_values(c, shape, 7);
    ASSERT_EQ(values.size(), specs.size());
    for (std::size_t i = 0; i < specs.size(); ++i) {
      std::size_t n = 1;
      for (const std::size_t e : specs[i].shape) n *= e;
      EXPECT_EQ(values[i].size(), n) << specs[i].name;
    }
  }
}

}  // namespace
