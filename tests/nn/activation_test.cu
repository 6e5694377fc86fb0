// Elementwise activations on the GPU against the double-precision reference: every kind (ELU
// and softplus also with non-default parameters), sizes 1, 31, 32, 33 (warp edges) and 1000003
// (many blocks, grid-stride), forward and the backward in both grad modes.
// Fresh random inputs (half in [-3, 3], half in [-25, 25], so that saturated tails, the negative
// branches of the stable sigmoid and the softplus threshold are all hit); outputs poisoned with
// NaN (forward, overwrite) or random values (accumulate) before each run.
// Tolerance |gpu - ref| <= atol + rtol * |ref|, atol 1e-6 for every kind (the fp32 rounding of
// values near 1, e.g. 1 - tanh^2 in saturation or dx + g in accumulate), rtol per kind:
//   Relu 1e-6 (exact but for the rounding of the accumulate sum),
//   Tanh, Sigmoid, Silu, Elu, Softplus 1e-5 (a few fp32 libm calls, ~10 ulp of headroom),
//   GeluTanh 2e-5 (the cubic inner argument's error is amplified by up to |2u| in sigmoid(2u)).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/nn/activation.h"
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
using test::nn_support::random_floats;
using test::nn_support::to_double;

constexpr double kAtol = 1e-6;

struct Case {
  const char* name;
  Activation activation;
  double rtol;
};

const Case kCases[] = {
    {"relu", {ActivationKind::Relu}, 1e-6},
    {"tanh", {ActivationKind::Tanh}, 1e-5},
    {"sigmoid", {ActivationKind::Sigmoid}, 1e-5},
    {"silu", {ActivationKind::Silu}, 1e-5},
    {"gelu_tanh", {ActivationKind::GeluTanh}, 2e-5},
    {"elu", {ActivationKind::Elu}, 1e-5},
    {"elu_alpha_0_7", {ActivationKind::Elu, 0.7f}, 1e-5},
    {"softplus", {ActivationKind::Softplus}, 1e-5},
    {"softplus_beta_2_threshold_10", {ActivationKind::Softplus, 1.0f, 2.0f, 10.0f}, 1e-5},
};

reference::Activation to_reference(const Activation& a) {
  reference::Activation r;
  switch (a.kind) {
    case ActivationKind::Relu: r.kind = reference::ActivationKind::Relu; break;
    case ActivationKind::Tanh: r.kind = reference::ActivationKind::Tanh; break;
    case ActivationKind::Sigmoid: r.kind = reference::ActivationKind::Sigmoid; break;
    case ActivationKind::Silu: r.kind = reference::ActivationKind::Silu; break;
    case ActivationKind::GeluTanh: r.kind = reference::ActivationKind::GeluTanh; break;
    case ActivationKind::Elu: r.kind = reference::ActivationKind::Elu; break;
    case ActivationKind::Softplus: r.kind = reference::ActivationKind::Softplus; break;
  }
  r.elu_alpha = a.elu_alpha;  // float -> double, exact
  r.softplus_beta = a.softplus_beta;
  r.softplus_threshold = a.softplus_threshold;
  return r;
}

// Half the elements in [-3, 3], half in [-25, 25], interleaved at random.
std::vector<float> activation_inputs(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> narrow(-3.0f, 3.0f), wide(-25.0f, 25.0f);
  std::bernoulli_distribution coin(0.5);
  std::vector<float> v(n);
  for (float& x : v) x = coin(rng) ? narrow(rng) : wide(rng);
  return v;
}

class ActivationTest : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t>> {};

TEST_P(ActivationTest, ForwardAndBackwardMatchTheReference) {
  RESIDENT_REQUIRE_GPU();
  const auto [case_index, n] = GetParam();
  const Case& c = kCases[case_index];
  std::printf("  %s, n %zu\n", c.name, n);
  std::mt19937_64 rng(n * 1009 + case_index);
  const reference::Activation ref = to_reference(c.activation);
  Stream stream;
  const std::vector<float> x = activation_inputs(n, rng), dy = random_floats(n, -1.0f, 1.0f, rng);
  DeviceBuffer<float> d_x(n), d_dy(n), d_y(n), d_dx(n);
  d_x.upload(x);
  d_dy.upload(dy);
  const float nan = std::numeric_limits<float>::quiet_NaN();

  d_y.upload(std::vector<float>(n, nan));
  kernels::launch_activation_forward(d_y.data(), d_x.data(), n, c.activation, stream.get());
  stream.synchronize();
  expect_close(d_y.download(), reference::activation_forward(ref, to_double(x)), {kAtol, c.rtol}, "y");

  for (const nn::GradMode mode : {nn::GradMode::Overwrite, nn::GradMode::Accumulate}) {
    const bool acc = mode == nn::GradMode::Accumulate;
    const std::vector<float> dx0 = acc ? random_floats(n, -1.0f, 1.0f, rng) : std::vector<float>(n, nan);
    d_dx.upload(dx0);
    kernels::launch_activation_backward(d_dx.data(), d_x.data(), d_dy.data(), n, c.activation, mode,
                                        stream.get());
    stream.synchronize();
    std::vector<double> rdx = to_double(dx0);
    reference::activation_backward(ref, to_double(x), to_double(dy), rdx,
                                   acc ? reference::GradMode::Accumulate : reference::GradMode::Overwrite);
    expect_close(d_dx.download(), rdx, {kAtol, c.rtol}, acc ? "dx acc" : "dx");
  }
}

std::string case_name(const ::testing::TestParamInfo<ActivationTest::ParamType>& info) {
  return std::string(kCases[std::get<0>(info.param)].name) + "_n" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(EveryKindAtEdgeSizes, ActivationTest,
                         ::testing::Combine(::testing::Range<std::size_t>(0, std::size(kCases)),
                                            ::testing::Values<std::size_t>(1, 31, 32, 33, 1000003)),
                         case_name);

TEST(Activation, RejectsANonPositiveSoftplusBeta) {
  // Host-side check before any launch: needs no device memory.
  const Activation bad{ActivationKind::Softplus, 1.0f, 0.0f, 20.0f};
  EXPECT_THROW(kernels::launch_activation_forward(nullptr, nullptr, 0, bad, nullptr), Error);
  EXPECT_THROW(kernels::launch_activation_backward(nullptr, nullptr, nullptr, 0, bad,
                                                   nn::GradMode::Overwrite, nullptr),
               Error);
}

}  // namespace
