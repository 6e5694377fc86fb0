// GLU on the GPU against the double-precision reference: x [rows, 2 * half] -> y [rows, half],
// forward and the backward in both grad modes, at edge shapes (1 x 1, warp edges 31/32/33 in
// half, many rows of half 1, and a large odd shape).
// Fresh random inputs (a in [-3, 3] or [-25, 25], likewise b, so both branches of the stable
// sigmoid and its saturated tails are hit; dy in [-1, 1]); outputs poisoned with NaN (forward,
// overwrite) or random values (accumulate). Tolerance |gpu - ref| <= atol + rtol * |ref| with
// atol 1e-6, rtol 1e-5 (one expf, a division and up to three products in fp32).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "kernels/nn/glu.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "tests/nn/nn_test_support.h"
#include "tests/reference/nn_reference.h"
#include "tests/support/gpu.h"
#include "tests/support/param_name.h"

namespace {

using namespace resident;
using test::nn_support::expect_close;
using test::nn_support::random_floats;
using test::nn_support::to_double;

constexpr double kAtol = 1e-6;
constexpr double kRtol = 1e-5;

// Half the elements in [-3, 3], half in [-25, 25], interleaved at random.
std::vector<float> glu_inputs(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> narrow(-3.0f, 3.0f), wide(-25.0f, 25.0f);
  std::bernoulli_distribution coin(0.5);
  std::vector<float> v(n);
  for (float& x : v) x = coin(rng) ? narrow(rng) : wide(rng);
  return v;
}

class GluTest : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t>> {};

TEST_P(GluTest, ForwardAndBackwardMatchTheReference) {
  RESIDENT_REQUIRE_GPU();
  const auto [rows, half] = GetParam();
  std::printf("  rows %zu, half %zu\n", rows, half);
  std::mt19937_64 rng(rows * 1000003 + half);
  Stream stream;
  const std::size_t in_size = rows * 2 * half, out_size = rows * half;
  const std::vector<float> x = glu_inputs(in_size, rng), dy = random_floats(out_size, -1.0f, 1.0f, rng);
  DeviceBuffer<float> d_x(in_size), d_dy(out_size), d_y(out_size), d_dx(in_size);
  d_x.upload(x);
  d_dy.upload(dy);
  const float nan = std::numeric_limits<float>::quiet_NaN();

  d_y.upload(std::vector<float>(out_size, nan));
  kernels::launch_glu_forward(d_y.data(), d_x.data(), rows, half, stream.get());
  stream.synchronize();
  expect_close(d_y.download(), reference::glu_forward(rows, half, to_double(x)), {kAtol, kRtol}, "y");

  for (const nn::GradMode mode : {nn::GradMode::Overwrite, nn::GradMode::Accumulate}) {
    const bool acc = mode == nn::GradMode::Accumulate;
    const std::vector<float> dx0 = acc ? random_floats(in_size, -1.0f, 1.0f, rng) : std::vector<float>(in_size, nan);
    d_dx.upload(dx0);
    kernels::launch_glu_backward(d_dx.data(), d_x.data(), d_dy.data(), rows, half, mode, stream.get());
    stream.synchronize();
    std::vector<double> rdx = to_double(dx0);
    reference::glu_backward(rows, half, to_double(x), to_double(dy), rdx,
                            acc ? reference::GradMode::Accumulate : reference::GradMode::Overwrite);
    expect_close(d_dx.download(), rdx, {kAtol, kRtol}, acc ? "dx acc" : "dx");
  }
}

INSTANTIATE_TEST_SUITE_P(EdgeShapes, GluTest,
                         ::testing::Values(std::make_tuple(1, 1), std::make_tuple(1, 31),
                                           std::make_tuple(3, 32), std::make_tuple(5, 33),
                                           std::make_tuple(1000003, 1), std::make_tuple(977, 1031)),
                         [](const auto& test_case) {
                           const auto& p = test_case.param;
                           return test::param_name("rows", std::get<0>(p), "half", std::get<1>(p));
                         });

}  // namespace
