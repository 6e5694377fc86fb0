// Linear on cuBLAS against the double-precision reference: forward with and without bias,
// backward dx/dW/db in both grad modes, at edge sizes (1, odd, 32-tile boundaries, large).
// Fresh random inputs; outputs poisoned with NaN (overwrite) or random (accumulate) before
// each run; tolerance |gpu - ref| <= atol + rtol * |ref| with atol 1e-5, rtol 1e-4 (fp32
// accumulation over up to `in` terms); dW and db, sums over the batch that may cancel to near
// 0, get atol 1e-5 + 2e-7 * batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/nn/linear.h"
#include "tests/nn/nn_test_support.h"
#include "tests/reference/nn_reference.h"
#include "tests/support/gpu.h"
#include "tests/support/param_name.h"

namespace {

using namespace resident;
using test::nn_support::expect_close;
using test::nn_support::Tolerance;
using test::nn_support::random_floats;
using test::nn_support::to_double;

constexpr double kAtol = 1e-5;
constexpr double kRtol = 1e-4;

class LinearTest : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t, std::size_t>> {};

TEST_P(LinearTest, ForwardAndBackwardMatchTheReference) {
  RESIDENT_REQUIRE_GPU();
  const auto [batch, in, out] = GetParam();
  std::printf("  batch %zu, in %zu, out %zu\n", batch, in, out);
  std::mt19937_64 rng(batch * 1000003 + in * 1009 + out);
  StreamContext context;
  const std::vector<float> x = random_floats(batch * in, -1.0f, 1.0f, rng);
  const std::vector<float> w = random_floats(out * in, -1.0f, 1.0f, rng);
  const std::vector<float> b = random_floats(out, -1.0f, 1.0f, rng);
  const std::vector<float> dy = random_floats(batch * out, -1.0f, 1.0f, rng);
  DeviceBuffer<float> d_x(x.size()), d_w(w.size()), d_b(b.size()), d_dy(dy.size()), d_y(batch * out);
  d_x.upload(x);
  d_w.upload(w);
  d_b.upload(b);
  d_dy.upload(dy);
  const nn::LinearShape shape{batch, in, out};
  const reference::LinearShape ref_shape{batch, in, out};

  for (const bool with_bias : {true, false}) {
    d_y.upload(std::vector<float>(batch * out, std::numeric_limits<float>::quiet_NaN()));
    nn::linear_forward(context, shape, d_y.data(), d_x.data(), d_w.data(), with_bias ? d_b.data() : nullptr);
    context.synchronize();
    const std::vector<double> ref_b = with_bias ? to_double(b) : std::vector<double>{};
    expect_close(d_y.download(),
                 reference::linear_forward(ref_shape, to_double(x), to_double(w), ref_b),
                 {kAtol, kRtol}, with_bias ? "y" : "y nobias");
  }

  for (const nn::GradMode mode : {nn::GradMode::Overwrite, nn::GradMode::Accumulate}) {
    const bool acc = mode == nn::GradMode::Accumulate;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const auto initial = [&](std::size_t n) {  // accumulate: random; overwrite: NaN poison
      return acc ? random_floats(n, -1.0f, 1.0f, rng) : std::vector<float>(n, nan);
    };
    const std::vector<float> dx0 = initial(batch * in), dw0 = initial(out * in), db0 = initial(out);
    DeviceBuffer<float> d_dx(dx0.size()), d_dw(dw0.size()), d_db(db0.size());
    d_dx.upload(dx0);
    d_dw.upload(dw0);
    d_db.upload(db0);
    nn::linear_backward(context, shape, {d_dx.data(), d_dw.data(), d_db.data()}, d_x.data(), d_w.data(),
                        d_dy.data(), mode);
    context.synchronize();
    std::vector<double> rdx = to_double(dx0), rdw = to_double(dw0), rdb = to_double(db0);
    reference::linear_backward(ref_shape, to_double(x), to_double(w), to_double(dy), {rdx, rdw, rdb},
                               acc ? reference::GradMode::Accumulate : reference::GradMode::Overwrite);
    expect_close(d_dx.download(), rdx, {kAtol, kRtol}, acc ? "dx acc" : "dx");
    // dW and db are fp32 sums over the batch, which may cancel to near 0: their absolute error
    // grows with the rows summed.
    const Tolerance over_batch{kAtol + 2e-7 * static_cast<double>(batch), kRtol};
    expect_close(d_dw.download(), rdw, over_batch, acc ? "dW acc" : "dW");
    expect_close(d_db.download(), rdb, over_batch, acc ? "db acc" : "db");
  }
}

INSTANTIATE_TEST_SUITE_P(
    EdgeSizes, LinearTest,
    ::testing::Values(std::make_tuple(1, 1, 1), std::make_tuple(3, 5, 7),
                      std::make_tuple(31, 32, 33), std::make_tuple(256, 64, 256),
                      std::make_tuple(4096, 4, 64), std::make_tuple(257, 255, 3)),
    [](const auto& test_case) {
      const auto& p = test_case.param;
      return test::param_name("batch", std::get<0>(p), "in", std::get<1>(p), "out", std::get<2>(p));
    });

}  // namespace
