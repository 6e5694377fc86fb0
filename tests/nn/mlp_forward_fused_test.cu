// The fused narrow-MLP forward against a double-precision reference, layer by layer: each layer's
// z is checked against the reference linear map of the GPU's own input to that layer (x, or the
// previous layer's a), and a against the reference activation of the GPU's z, so an error is
// pinned to its layer. Shapes hit the row tile (1, 31, 33, 64, 65, 4097 rows), widths that are and
// are not multiples of 4 (the float4 and scalar paths), 1 to 4 layers, widths up to the 128 limit
// (the DQN Q-network 64-128-128-3, whose weights need the shared-memory opt-in). Outputs
// poisoned with NaN before the run; fresh random inputs and weights per case.
// Tolerances |gpu - ref| <= atol + rtol |ref|:
//   z   atol 2e-6 * in, rtol 1e-5 (fp32 fmaf chain over `in` terms of |x w| <= 1, plus a bias)
//   a   atol 1e-6, rtol 2e-5 (the activation kernels' own tolerance)
// Invalid arguments (a width of 129, 0 or 5 layers, null, a misaligned output) throw naming the
// field (CPU test: the checks come before any launch).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <iterator>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/nn/mlp_forward_fused.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "tests/nn/nn_test_support.h"
#include "tests/reference/nn_reference.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident;
using kernels::Activation;
using kernels::ActivationKind;
using test::nn_support::expect_close;
using test::nn_support::nans;
using test::nn_support::random_floats;
using test::nn_support::to_double;

using Kind = test::nn_support::HiddenActivation;
constexpr const auto& kKinds = test::nn_support::kHiddenActivations;

struct Case {
  std::vector<std::size_t> widths;
  std::size_t rows;
};

class FusedMlpForwardTest : public ::testing::TestWithParam<std::tuple<std::size_t, Case>> {};

TEST_P(FusedMlpForwardTest, EveryLayerMatchesTheReference) {
  RESIDENT_REQUIRE_GPU();
  const Kind& kind = kKinds[std::get<0>(GetParam())];
  const Case& c = std::get<1>(GetParam());
  const std::size_t layers = c.widths.size() - 1, rows = c.rows;
  std::printf("  %s, %zu layers, rows %zu\n", kind.name, layers, rows);
  std::mt19937_64 rng(rows * 131 + layers * 17 + std::get<0>(GetParam()));
  Stream stream;
  const std::vector<float> x = random_floats(rows * c.widths[0], -1.0f, 1.0f, rng);
  DeviceBuffer<float> d_x(x.size());
  d_x.upload(x);
  std::vector<std::vector<float>> weights, biases;
  std::vector<DeviceBuffer<float>> d_w, d_b, d_z, d_a;
  kernels::FusedMlp mlp;
  mlp.layers = static_cast<unsigned>(layers);
  for (std::size_t l = 0; l <= layers; ++l) mlp.widths[l] = static_cast<unsigned>(c.widths[l]);
  for (std::size_t l = 0; l < layers; ++l) {
    const std::size_t in = c.widths[l], out = c.widths[l + 1];
    weights.push_back(random_floats(out * in, -1.0f, 1.0f, rng));
    biases.push_back(random_floats(out, -0.5f, 0.5f, rng));
    d_w.emplace_back(out * in);
    d_b.emplace_back(out);
    d_z.emplace_back(rows * out);
    d_a.emplace_back(rows * out);
    d_w.back().upload(weights.back());
    d_b.back().upload(biases.back());
    d_z.back().upload(nans(rows * out));
    d_a.back().upload(nans(rows * out));
  }
  for (std::size_t l = 0; l < layers; ++l)
    mlp.layer[l] = {d_w[l].data(), d_b[l].data(), d_z[l].data(),
                    l + 1 < layers ? d_a[l].data() : nullptr};
  const Activation activation{kind.kind};
  kernels::launch_fused_mlp_forward(mlp, d_x.data(), rows, activation, stream.get());
  stream.synchronize();

  const reference::Activation ref_activation{kind.reference_kind};
  std::vector<float> input = x;
  for (std::size_t l = 0; l < layers; ++l) {
    const std::size_t in = c.widths[l], out = c.widths[l + 1];
    std::vector<double> z_ref(rows * out);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < out; ++j) {
        double sum = biases[l][j];
        for (std::size_t k = 0; k < in; ++k)
          sum += static_cast<double>(input[r * in + k]) * weights[l][j * in + k];
        z_ref[r * out + j] = sum;
      }
    const std::vector<float> z = d_z[l].download();
    const std::string layer = "layer " + std::to_string(l);
    expect_close(z, z_ref, {2e-6 * static_cast<double>(in), 1e-5}, layer + " z");
    if (l + 1 == layers) break;
    const std::vector<float> a = d_a[l].download();
    expect_close(a, reference::activation_forward(ref_activation, to_double(z)), {1e-6, 2e-5},
                 layer + " a");
    input = a;
  }
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<std::size_t, Case>>& info) {
  std::string name = kKinds[std::get<0>(info.param)].name;
  for (const std::size_t w : std::get<1>(info.param).widths) name += "_" + std::to_string(w);
  return name + "_rows" + std::to_string(std::get<1>(info.param).rows);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FusedMlpForwardTest,
    ::testing::Combine(::testing::Range<std::size_t>(0, std::size(kKinds)),
                       ::testing::Values(Case{{4, 64, 64, 2}, 1}, Case{{4, 64, 64, 2}, 31},
                                         Case{{4, 64, 64, 2}, 33}, Case{{4, 64, 64, 2}, 65},
                                         Case{{4, 64, 64, 1}, 4097},
                                         Case{{7, 13, 5}, 64}, Case{{64, 64, 64, 64, 3}, 130},
                                         Case{{3, 1}, 5}, Case{{1, 1}, 1},
                                         Case{{64, 12, 8, 64}, 200}, Case{{64, 128, 128, 3}, 256},
                                         Case{{4, 128, 2}, 33}, Case{{128, 100, 7}, 70})),
    case_name);

// A hidden layer's z may be left out (the MLP does so for ReLU / tanh): nothing is written there,
// and every a and the output are the same bits as with z kept.
TEST(FusedMlpForwardOptionalZ, HiddenPreActivationsCanBeSkipped) {
  RESIDENT_REQUIRE_GPU();
  const std::vector<std::size_t> widths{4, 64, 12, 2};
  const std::size_t rows = 100, layers = widths.size() - 1;
  std::mt19937_64 rng(2024);
  Stream stream;
  DeviceBuffer<float> d_x(rows * widths[0]);
  d_x.upload(random_floats(rows * widths[0], -1.0f, 1.0f, rng));
  std::vector<DeviceBuffer<float>> d_w, d_b, d_z[2], d_a[2];
  for (std::size_t l = 0; l < layers; ++l) {
    const std::size_t in = widths[l], out = widths[l + 1];
    d_w.emplace_back(out * in);
    d_w.back().upload(random_floats(out * in, -1.0f, 1.0f, rng));
    d_b.emplace_back(out);
    d_b.back().upload(random_floats(out, -0.5f, 0.5f, rng));
    for (int run = 0; run < 2; ++run) {
      d_z[run].emplace_back(rows * out);
      d_a[run].emplace_back(rows * out);
      d_z[run].back().upload(nans(rows * out));
      d_a[run].back().upload(nans(rows * out));
    }
  }
  for (int run = 0; run < 2; ++run) {
    kernels::FusedMlp mlp;
    mlp.layers = static_cast<unsigned>(layers);
    for (std::size_t l = 0; l <= layers; ++l) mlp.widths[l] = static_cast<unsigned>(widths[l]);
    for (std::size_t l = 0; l < layers; ++l) {
      const bool hidden = l + 1 < layers;
      mlp.layer[l] = {d_w[l].data(), d_b[l].data(),
                      run == 1 && hidden ? nullptr : d_z[run][l].data(),
                      hidden ? d_a[run][l].data() : nullptr};
    }
    kernels::launch_fused_mlp_forward(mlp, d_x.data(), rows, Activation{ActivationKind::Tanh},
                                      stream.get());
  }
  stream.synchronize();
  for (std::size_t l = 0; l < layers; ++l) {
    const bool hidden = l + 1 < layers;
    if (hidden) {
      EXPECT_EQ(d_a[0][l].download(), d_a[1][l].download()) << "layer " << l << " a";
      for (const float v : d_z[1][l].download()) ASSERT_TRUE(std::isnan(v)) << "z written";
    } else {
      EXPECT_EQ(d_z[0][l].download(), d_z[1][l].download()) << "output";
    }
  }
}

// Four 128-wide layers need more shared memory than a block may have: refused, naming the bytes.
TEST(FusedMlpForwardLimits, WeightsBeyondSharedMemoryAreRefused) {
  RESIDENT_REQUIRE_GPU();
  const std::vector<std::size_t> widths{128, 128, 128, 128, 128};
  const std::size_t bytes = kernels::fused_mlp_forward_shared_bytes(widths);
  ASSERT_GT(bytes, kernels::fused_mlp_forward_shared_limit());
  DeviceBuffer<float> buffer(128 * 128);
  kernels::FusedMlp mlp;
  mlp.layers = 4;
  for (unsigned l = 0; l <= 4; ++l) mlp.widths[l] = 128;
  for (unsigned l = 0; l < 4; ++l) mlp.layer[l] = {buffer.data(), buffer.data(), buffer.data(),
                                                   l < 3 ? buffer.data() : nullptr};
  try {
    kernels::launch_fused_mlp_forward(mlp, buffer.data(), 1, Activation{ActivationKind::Relu},
                                      nullptr);
    ADD_FAILURE() << "launched with " << bytes << " bytes of shared memory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(bytes) + " bytes of shared memory"),
              std::string::npos)
        << e.what();
  }
}

// ----- argument checks (CPU: they throw before any launch)

kernels::FusedMlp valid_mlp(float* buffer) {
  kernels::FusedMlp mlp;
  mlp.layers = 2;
  mlp.widths[0] = 4;
  mlp.widths[1] = 8;
  mlp.widths[2] = 2;
  mlp.layer[0] = {buffer, buffer, buffer, buffer};
  mlp.layer[1] = {buffer, buffer, buffer, nullptr};
  return mlp;
}

void expect_invalid(const kernels::FusedMlp& mlp, const float* x, const std::string& needle) {
  try {
    kernels::launch_fused_mlp_forward(mlp, x, 10, Activation{ActivationKind::Tanh}, nullptr);
    ADD_FAILURE() << "no error for " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(FusedMlpForwardArguments, InvalidArgumentsThrowNamingTheField) {
  alignas(16) static float buffer[64];
  kernels::FusedMlp mlp = valid_mlp(buffer);
  mlp.widths[1] = 129;
  expect_invalid(mlp, buffer, "widths[1] = 129, allowed [1, 128]");
  mlp = valid_mlp(buffer);
  mlp.layers = 0;
  expect_invalid(mlp, buffer, "layers = 0, allowed [1, 4]");
  mlp.layers = 5;
  expect_invalid(mlp, buffer, "layers = 5, allowed [1, 4]");
  mlp = valid_mlp(buffer);
  mlp.layer[0].activation = nullptr;
  expect_invalid(mlp, buffer, "layer[0]");
  mlp = valid_mlp(buffer);
  expect_invalid(mlp, nullptr, "x is null");
  mlp = valid_mlp(buffer);
  mlp.layer[0].pre_activation = buffer + 1;  // width 8: float4 stores
  expect_invalid(mlp, buffer, "16-byte aligned");
  EXPECT_TRUE(kernels::fused_mlp_forward_supports(std::vector<std::size_t>{4, 64, 64, 2}));
  EXPECT_TRUE(kernels::fused_mlp_forward_supports(std::vector<std::size_t>{64, 128, 128, 3}));
  EXPECT_FALSE(kernels::fused_mlp_forward_supports(std::vector<std::size_t>{4, 129, 2}));
  // W^T of 64x128, 128x128, 128x3 (+ biases, each part rounded up to 4 floats) and two tiles of
  // 32 rows x 129 floats.
  EXPECT_EQ(kernels::fused_mlp_forward_shared_bytes(std::vector<std::size_t>{64, 128, 128, 3}),
            (8192 + 128 + 16384 + 128 + 384 + 4 + 2 * 32 * 129) * sizeof(float));
  EXPECT_FALSE(kernels::fused_mlp_forward_supports(std::vector<std::size_t>{4, 8, 8, 8, 8, 2}));
  EXPECT_FALSE(kernels::fused_mlp_forward_supports(std::vector<std::size_t>{4}));
}

}  // namespace
