// The fused narrow-MLP backward against a double-precision backward of the same forward: the
// GPU's fused forward runs first (its saved a_l are the backward's inputs, as in nn::Mlp), then
// the reference computes, in double from those saved floats,
//   dz_{L-1} = dy;  dW_l = dz_l^T a_{l-1} (a_{-1} = x);  db_l = sum_r dz_l;
//   dz_{l-1} = (dz_l W_l) * f'(a_{l-1}),  f' = 1 - a^2 (tanh) or [a > 0] (ReLU).
// Tolerance per gradient entry: |gpu - ref| <= 1e-6 + 2e-5 * sum_r |term_r| (the fp32 sums run
// over at most ceil(rows / 384 / 32) tiles of 32 rows per block, then over <= 384 block sums).
// Shapes: the PPO actor/critic (4-64-64-2 / -1) at 1, 31, 33 and 4097 rows (one tile per block,
// partial tiles) and 13000 / 40000 rows (several tiles per block: 407 / 1250 tiles on at most 384
// blocks; 13000 also ends in a partial tile), one, two and four layers, hidden widths 4, 8/12,
// 32/16 and 16, 20 outputs (389 gradient blocks: the fourth accumulator slot), both
// activations, overwrite (gradients poisoned with NaN) and accumulate (gradients start random:
// they must end at start + ref). CPU tests: which widths are supported, the scratch size and the
// errors for bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/nn/mlp_backward_fused.h"
#include "kernels/nn/mlp_forward_fused.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "tests/nn/nn_test_support.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident;
using kernels::ActivationKind;
using test::nn_support::nans;
using test::nn_support::random_floats;

struct Case {
  std::vector<std::size_t> widths;
  std::size_t rows;
};

double derivative_from_output(ActivationKind kind, double a) {
  return kind == ActivationKind::Tanh ? 1.0 - a * a : (a > 0.0 ? 1.0 : 0.0);
}

class FusedMlpBackwardTest
    : public ::testing::TestWithParam<std::tuple<Case, ActivationKind, bool>> {};

TEST_P(FusedMlpBackwardTest, GradientsMatchTheReference) {
  RESIDENT_REQUIRE_GPU();
  const auto& [c, kind, accumulate] = GetParam();
  const std::size_t layers = c.widths.size() - 1, rows = c.rows;
  std::printf("  %zu layers, rows %zu, %s, %s\n", layers, rows,
              kind == ActivationKind::Tanh ? "tanh" : "relu",
              accumulate ? "accumulate" : "overwrite");
  std::mt19937_64 rng(rows * 104729 + layers * 13 + (accumulate ? 7 : 0) +
                      (kind == ActivationKind::Tanh ? 3 : 0));
  Stream stream;
  const std::vector<float> x = random_floats(rows * c.widths[0], -1.0f, 1.0f, rng);
  const std::vector<float> dy = random_floats(rows * c.widths.back(), -1.0f, 1.0f, rng);
  DeviceBuffer<float> d_x(x.size()), d_dy(dy.size());
  d_x.upload(x);
  d_dy.upload(dy);
  std::vector<std::vector<float>> w, start_w, start_b;
  std::vector<DeviceBuffer<float>> d_w, d_b, d_z, d_a, d_gw, d_gb;
  kernels::FusedMlp mlp;
  kernels::FusedMlpGrads grads;
  mlp.layers = static_cast<unsigned>(layers);
  for (std::size_t l = 0; l <= layers; ++l) mlp.widths[l] = static_cast<unsigned>(c.widths[l]);
  for (std::size_t l = 0; l < layers; ++l) {
    const std::size_t in = c.widths[l], out = c.widths[l + 1];
    // Weights scaled by 1/sqrt(in) keep the activations away from tanh's saturation.
    const float scale = 1.0f / std::sqrt(static_cast<float>(in));
    w.push_back(random_floats(out * in, -scale, scale, rng));
    start_w.push_back(accumulate ? random_floats(out * in, -1.0f, 1.0f, rng) : nans(out * in));
    start_b.push_back(accumulate ? random_floats(out, -1.0f, 1.0f, rng) : nans(out));
    d_w.emplace_back(out * in);
    d_b.emplace_back(out);
    d_z.emplace_back(rows * out);
    d_a.emplace_back(rows * out);
    d_gw.emplace_back(out * in);
    d_gb.emplace_back(out);
    d_w.back().upload(w.back());
    d_b.back().upload(random_floats(out, -0.2f, 0.2f, rng));
    d_gw.back().upload(start_w.back());
    d_gb.back().upload(start_b.back());
  }
  for (std::size_t l = 0; l < layers; ++l) {
    const bool hidden = l + 1 < layers;
    mlp.layer[l] = {d_w[l].data(), d_b[l].data(), hidden ? nullptr : d_z[l].data(),
                    hidden ? d_a[l].data() : nullptr};
    grads.weight[l] = d_gw[l].data();
    grads.bias[l] = d_gb[l].data();
  }
  const kernels::Activation activation{kind};
  const std::size_t scratch_floats = kernels::fused_mlp_backward_scratch_floats(c.widths, rows);
  DeviceBuffer<float> scratch(scratch_floats);
  scratch.upload(nans(scratch_floats));
  kernels::launch_fused_mlp_forward(mlp, d_x.data(), rows, activation, stream.get());
  kernels::launch_fused_mlp_backward(mlp, d_x.data(), d_dy.data(), rows, activation, grads,
                                     accumulate ? nn::GradMode::Accumulate
                                                : nn::GradMode::Overwrite,
                                     scratch.data(), scratch_floats, stream.get());
  stream.synchronize();

  // The reference, from the GPU's saved activations.
  std::vector<std::vector<float>> saved(layers);
  for (std::size_t l = 0; l + 1 < layers; ++l) saved[l] = d_a[l].download();
  std::vector<double> dz(dy.begin(), dy.end());
  for (std::size_t l = layers; l-- > 0;) {
    const std::size_t in = c.widths[l], out = c.widths[l + 1];
    const std::vector<float>& input = l == 0 ? x : saved[l - 1];
    std::vector<double> gw(out * in, 0.0), gw_mag(out * in, 0.0), gb(out, 0.0), gb_mag(out, 0.0);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < out; ++j) {
        const double d = dz[r * out + j];
        gb[j] += d;
        gb_mag[j] += std::fabs(d);
        for (std::size_t k = 0; k < in; ++k) {
          const double term = d * input[r * in + k];
          gw[j * in + k] += term;
          gw_mag[j * in + k] += std::fabs(term);
        }
      }
    const std::vector<float> got_w = d_gw[l].download(), got_b = d_gb[l].download();
    const auto check = [&](const std::vector<float>& got, const std::vector<double>& want,
                           const std::vector<double>& magnitude, const std::vector<float>& start,
                           const std::string& what) {
      std::size_t bad = 0;
      double worst = 0.0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        const double expected = want[i] + (accumulate ? static_cast<double>(start[i]) : 0.0);
        const double error = std::fabs(static_cast<double>(got[i]) - expected);
        const double limit = 1e-6 + 2e-5 * (magnitude[i] + (accumulate ? 1.0 : 0.0));
        if (!(error <= limit)) {
          if (bad++ < 5)
            ADD_FAILURE() << what << "[" << i << "]: " << got[i] << " vs " << expected
                          << " (error " << error << ", limit " << limit << ")";
        }
        if (std::isfinite(error)) worst = std::max(worst, error / limit);
      }
      std::printf("    %s: %zu of %zu outside, worst error / limit %.3f\n", what.c_str(), bad,
                  got.size(), worst);
    };
    const std::string layer = "layer " + std::to_string(l);
    check(got_w, gw, gw_mag, start_w[l], layer + " dW");
    check(got_b, gb, gb_mag, start_b[l], layer + " db");
    if (l == 0) break;
    std::vector<double> next(rows * in, 0.0);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t k = 0; k < in; ++k) {
        double s = 0.0;
        for (std::size_t j = 0; j < out; ++j) s += dz[r * out + j] * w[l][j * in + k];
        next[r * in + k] = s * derivative_from_output(kind, input[r * in + k]);
      }
    dz = std::move(next);
  }
}

std::string case_name(
    const ::testing::TestParamInfo<std::tuple<Case, ActivationKind, bool>>& info) {
  std::string name = std::get<1>(info.param) == ActivationKind::Tanh ? "tanh" : "relu";
  for (const std::size_t w : std::get<0>(info.param).widths) name += "_" + std::to_string(w);
  return name + "_rows" + std::to_string(std::get<0>(info.param).rows) +
         (std::get<2>(info.param) ? "_accumulate" : "_overwrite");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FusedMlpBackwardTest,
    ::testing::Combine(::testing::Values(Case{{4, 64, 64, 2}, 1}, Case{{4, 64, 64, 2}, 31},
                                         Case{{4, 64, 64, 2}, 33}, Case{{4, 64, 64, 2}, 4097},
                                         Case{{4, 64, 64, 2}, 13000},
                                         Case{{4, 64, 64, 1}, 40000}, Case{{5, 3}, 50},
                                         Case{{4, 64, 2}, 100}, Case{{3, 4, 2}, 40},
                                         Case{{6, 8, 12, 3}, 77}, Case{{16, 32, 16, 4}, 300},
                                         Case{{3, 16, 16, 16, 5}, 130},
                                         Case{{4, 64, 64, 20}, 200}),
                       ::testing::Values(ActivationKind::Tanh, ActivationKind::Relu),
                       ::testing::Bool()),
    case_name);

// CPU: no launch is made before these checks.
TEST(FusedMlpBackward, SupportsNarrowMlpsWithHiddenWidthsInFours) {
  using W = std::vector<std::size_t>;
  EXPECT_TRUE(kernels::fused_mlp_backward_supports(W{4, 64, 64, 2}));
  EXPECT_TRUE(kernels::fused_mlp_backward_supports(W{4, 64, 64, 1}));
  EXPECT_TRUE(kernels::fused_mlp_backward_supports(W{5, 3}));
  EXPECT_TRUE(kernels::fused_mlp_backward_supports(W{4, 64, 64, 20}));  // 389 gradient blocks
  EXPECT_FALSE(kernels::fused_mlp_backward_supports(W{4, 65, 2}));        // width > 64
  EXPECT_FALSE(kernels::fused_mlp_backward_supports(W{4, 62, 2}));        // hidden not in 4s
  EXPECT_FALSE(kernels::fused_mlp_backward_supports(W{64, 128, 128, 3}));  // the DQN net
  EXPECT_FALSE(kernels::fused_mlp_backward_supports(W{64, 64, 64, 64, 64}));  // too many blocks
  EXPECT_FALSE(kernels::fused_mlp_backward_supports(W{4}));
  // 4-64-64-2 has 4*64+64 + 64*64+64 + 64*2+2 = 4610 parameters; 384 blocks at most.
  EXPECT_EQ(kernels::fused_mlp_backward_scratch_floats(W{4, 64, 64, 2}, 131072), 384u * 4610u);
  EXPECT_EQ(kernels::fused_mlp_backward_scratch_floats(W{4, 64, 64, 2}, 33), 2u * 4610u);
  EXPECT_THROW(kernels::fused_mlp_backward_scratch_floats(W{4, 65, 2}, 1), Error);
}

TEST(FusedMlpBackward, InvalidArgumentsNameTheField) {
  float dummy = 0.0f;
  kernels::FusedMlp mlp;
  mlp.layers = 1;
  mlp.widths[0] = 4;
  mlp.widths[1] = 2;
  mlp.layer[0] = {&dummy, &dummy, &dummy, nullptr};
  kernels::FusedMlpGrads grads;
  grads.weight[0] = grads.bias[0] = &dummy;
  const auto message = [&](const kernels::FusedMlp& m, kernels::ActivationKind kind,
                           std::size_t scratch_floats) {
    try {
      kernels::launch_fused_mlp_backward(m, &dummy, &dummy, 100, kernels::Activation{kind},
                                         grads, nn::GradMode::Overwrite, &dummy, scratch_floats,
                                         nullptr);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string gelu = message(mlp, kernels::ActivationKind::GeluTanh, 1 << 20);
  EXPECT_NE(gelu.find("ReLU or tanh"), std::string::npos) << gelu;
  const std::string short_scratch = message(mlp, kernels::ActivationKind::Tanh, 10);
  EXPECT_NE(short_scratch.find("scratch holds 10 floats, this launch needs 40"), std::string::npos)
      << short_scratch;
  kernels::FusedMlp wide = mlp;
  wide.widths[1] = 65;
  const std::string too_wide = message(wide, kernels::ActivationKind::Tanh, 1 << 20);
  EXPECT_NE(too_wide.find("widths 4-65 not supported"), std::string::npos) << too_wide;
}

}  // namespace
