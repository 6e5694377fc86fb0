// CPU tests of the TFT model (no GPU): the double reference's full-model backward (every
// parameter tensor) against central finite differences at tiny configs; every tensor receives a
// gradient; a negative control showing the check rejects a wrong backward; the variable
// selection and attention weights are distributions; TftConfig validation names the field; the
// slab's tensors (tft_init.h) are the reference's, in order.
#include "tests/reference/tft_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "lib/models/tft/tft_config.h"
#include "lib/models/tft/tft_init.h"
#include "tests/reference/finite_difference.h"

namespace {

namespace ref = resident::reference;
using resident::models::ModelShape;
using resident::models::TftConfig;

std::vector<double> uniform_values(std::size_t n, double low, double high, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(low, high);
  std::vector<double> values(n);
  for (double& v : values) v = uniform(rng);
  return values;
}

std::vector<double> pack(const std::vector<ref::TftTensor>& p) {
  std::vector<double> flat;
  for (const ref::TftTensor& t : p) flat.insert(flat.end(), t.values.begin(), t.values.end());
  return flat;
}

std::vector<ref::TftTensor> unpack(const ref::TftDims& dims, std::span<const double> flat) {
  std::vector<ref::TftTensor> p = ref::tft_zero_params(dims);
  std::size_t at = 0;
  for (ref::TftTensor& t : p)
    for (double& v : t.values) v = flat[at++];
  return p;
}

// Weights U(-0.6, 0.6), LayerNorm gammas around 1: every path carries signal, the softmaxes are
// far from one-hot and the ELUs see both signs.
std::vector<ref::TftTensor> random_params(const ref::TftDims& dims, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<ref::TftTensor> p = ref::tft_zero_params(dims);
  for (ref::TftTensor& t : p) {
    const bool gamma = t.name.find("gamma") != std::string::npos;
    t.values = gamma ? uniform_values(t.values.size(), 0.7, 1.3, rng)
                     : uniform_values(t.values.size(), -0.6, 0.6, rng);
  }
  return p;
}

ref::TftDims dims_of(std::size_t L, std::size_t F, std::size_t H, std::size_t heads,
                     std::size_t dc, std::size_t outputs, std::size_t quantiles) {
  ref::TftDims d;
  d.window = L;
  d.features = F;
  d.hidden = H;
  d.heads = heads;
  d.prescale = dc;
  d.outputs = outputs;
  d.quantiles = quantiles;
  return d;
}

struct Case {
  const char* name;
  ref::TftDims dims;
  std::size_t batch;
};

class TftReferenceFd : public ::testing::TestWithParam<Case> {};

TEST_P(TftReferenceFd, BackwardMatchesFiniteDifferences) {
  const Case c = GetParam();
  std::mt19937_64 rng(17);
  const std::vector<ref::TftTensor> params = random_params(c.dims, 5);
  const std::vector<double> x =
      uniform_values(c.batch * c.dims.window * c.dims.features, -1.5, 1.5, rng);
  const std::vector<double> flat = pack(params);
  const ref::VectorFunction forward = [&](std::span<const double> theta) {
    return ref::tft_forward(c.dims, unpack(c.dims, theta), x, c.batch);
  };
  const ref::VectorJacobianProduct backward = [&](std::span<const double> theta,
                                                  std::span<const double> up) {
    return pack(ref::tft_backward(c.dims, unpack(c.dims, theta), x, c.batch, up));
  };
  const ref::GradientComparison r = ref::check_backward(forward, backward, flat, 3);
  std::printf("%s: %zu parameters, max abs error %.3g, max rel error %.3g (tolerance 5e-6)\n",
              c.name, flat.size(), r.max_abs_error, r.max_rel_error);
  EXPECT_LT(r.max_rel_error, 5e-6) << "worst index " << r.worst_index << ": analytic "
                                   << r.analytic_at_worst << ", numeric " << r.numeric_at_worst;
  // Every tensor receives a gradient (no path silently dropped). With one step the recurrent
  // weight (h_{-1} = 0) and the query and keys (one visible step: softmax 1) have none.
  if (c.dims.window == 1) return;
  std::vector<double> up(c.batch * c.dims.predictions());
  for (std::size_t i = 0; i < up.size(); ++i) up[i] = (i % 3 == 0) ? 1.0 : -0.5;
  for (const ref::TftTensor& t : ref::tft_backward(c.dims, params, x, c.batch, up)) {
    double norm = 0.0;
    for (const double v : t.values) norm += v * v;
    EXPECT_GT(norm, 0.0) << t.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Configs, TftReferenceFd,
    ::testing::Values(Case{"two_heads", dims_of(4, 3, 4, 2, 2, 1, 3), 2},
                      Case{"one_head_wide_prescale", dims_of(5, 2, 6, 1, 3, 2, 2), 2},
                      Case{"three_heads_one_quantile", dims_of(3, 4, 6, 3, 1, 1, 1), 1},
                      Case{"one_step", dims_of(1, 2, 4, 2, 2, 2, 3), 2}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

// The check must be able to fail: a backward that drops the recurrent path of the LSTM (its
// gradient scaled by 0.9) is rejected.
TEST(TftReference, NegativeControlRejectsAWrongBackward) {
  const ref::TftDims d = dims_of(4, 2, 4, 2, 2, 1, 3);
  std::mt19937_64 rng(3);
  const std::vector<ref::TftTensor> params = random_params(d, 9);
  const std::vector<double> x = uniform_values(d.window * d.features, -1.0, 1.0, rng);
  const ref::VectorFunction forward = [&](std::span<const double> theta) {
    return ref::tft_forward(d, unpack(d, theta), x, 1);
  };
  const ref::VectorJacobianProduct wrong = [&](std::span<const double> theta,
                                               std::span<const double> up) {
    std::vector<ref::TftTensor> g = ref::tft_backward(d, unpack(d, theta), x, 1, up);
    for (ref::TftTensor& t : g)
      if (t.name == "lstm.recurrent_weight")
        for (double& v : t.values) v *= 0.9;
    return pack(g);
  };
  const ref::GradientComparison r = ref::check_backward(forward, wrong, pack(params), 3);
  EXPECT_GT(r.max_rel_error, 1e-3);
}

TEST(TftReference, SelectionAndAttentionAreDistributions) {
  const ref::TftDims d = dims_of(6, 3, 8, 2, 4, 1, 3);
  std::mt19937_64 rng(4);
  const std::vector<ref::TftTensor> params = random_params(d, 2);
  const std::vector<double> x = uniform_values(2 * d.window * d.features, -1.0, 1.0, rng);
  ref::TftForwardDetail detail;
  const std::vector<double> y = ref::tft_forward(d, params, x, 2, &detail);
  ASSERT_EQ(y.size(), 2 * d.predictions());
  ASSERT_EQ(detail.selection.size(), 2 * d.window * d.features);
  ASSERT_EQ(detail.attention.size(), 2 * d.window);
  for (std::size_t r = 0; r < 2 * d.window; ++r) {
    double sum = 0.0;
    for (std::size_t j = 0; j < d.features; ++j) {
      EXPECT_GT(detail.selection[r * d.features + j], 0.0);
      sum += detail.selection[r * d.features + j];
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
  for (std::size_t b = 0; b < 2; ++b) {
    double sum = 0.0;
    for (std::size_t t = 0; t < d.window; ++t) sum += detail.attention[b * d.window + t];
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
}

TEST(TftReference, RejectsBadDims) {
  EXPECT_THROW(ref::tft_zero_params(dims_of(4, 2, 6, 4, 2, 1, 3)), resident::Error);  // 6 % 4
  EXPECT_THROW(ref::tft_zero_params(dims_of(0, 2, 4, 2, 2, 1, 3)), resident::Error);
}

std::string config_error(const TftConfig& config, const ModelShape& shape) {
  try {
    resident::models::validate_tft_config(config, shape);
  } catch (const resident::Error& e) {
    return e.what();
  }
  return "";
}

TEST(TftConfig, ErrorsNameTheField) {
  const ModelShape shape{64, 32, 1, 256};
  EXPECT_EQ(config_error(TftConfig{}, shape), "");
  TftConfig c;
  c.hidden = 65;
  EXPECT_NE(config_error(c, shape).find("hidden = 65, allowed [2, 64]"), std::string::npos);
  c = TftConfig{};
  c.heads = 3;
  EXPECT_NE(config_error(c, shape).find("multiple of heads = 3"), std::string::npos);
  c = TftConfig{};
  c.quantiles = {0.1f, 0.9f};
  EXPECT_NE(config_error(c, shape).find("0.5 level"), std::string::npos);
  c.quantiles = {0.5f, 0.1f};
  EXPECT_NE(config_error(c, shape).find("ascending"), std::string::npos);
  c = TftConfig{};
  EXPECT_NE(config_error(c, ModelShape{2000, 32, 1, 256}).find("shape.window = 2000"),
            std::string::npos);
  EXPECT_EQ(resident::models::tft_median_index(TftConfig{}), 1u);
}

TEST(TftConfig, SlabTensorsAreTheReferences) {
  TftConfig c;
  c.hidden = 8;
  c.heads = 2;
  c.prescale = 3;
  const ModelShape shape{5, 4, 2, 16};
  const ref::TftDims d = dims_of(5, 4, 8, 2, 3, 2, 3);
  const auto specs = resident::models::tft_tensor_specs(c, shape);
  const auto tensors = ref::tft_zero_params(d);
  ASSERT_EQ(specs.size(), tensors.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(specs[i].name, tensors[i].name);
    EXPECT_EQ(specs[i].shape, tensors[i].shape) << specs[i].name;
  }
  const auto values = resident::models::tft_initial_values(c, shape, 7);
  EXPECT_EQ(values, resident::models::tft_initial_values(c, shape, 7));
  EXPECT_NE(values, resident::models::tft_initial_values(c, shape, 8));
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name.find("gamma") != std::string::npos) {
      for (const float v : values[i]) EXPECT_EQ(v, 1.0f);
    }
    if (specs[i].name == "vsn_var.fc1.weight") {
      for (const float v : values[i]) EXPECT_LE(std::fabs(v), 1.0f / std::sqrt(3.0f));
    }
  }
}

}  // namespace
