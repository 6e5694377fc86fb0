// The fused MSE loss + gradient (kernels/nn/mse_loss_fused.h) against the double reference, at the
// reduction's edge sizes (1, 31, 32, 33, one partial's 2048 terms +-1, 4097, and past the
// 1024-partial clamp), in both grad modes, with d_loss = 0.75; outputs poisoned with NaN
// (overwrite) or random values (accumulate). Also: the loss equals the two-kernel launch_mse_loss
// (same split and order, so the same bits unless the compiler contracts the two differently),
// the gradient equals launch_mse_loss_backward's bits (same formula), repeated launches and graph
// replays give bit-identical results, and the ticket counter is back at 0 after every launch.
// CPU: invalid arguments throw before any launch.
//
// Tolerances |gpu - ref| <= atol + rtol |ref| (loss_test.cu's):
//   loss      atol 1e-7, rtol 1e-5
//   gradient  atol 2e-7, rtol 1e-5
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/nn/losses.h"
#include "kernels/nn/mse_loss_fused.h"
#include "lib/core/device_buffer.h"
#include "lib/core/library_checks.h"
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

constexpr test::nn_support::Tolerance kLoss{1e-7, 1e-5};
constexpr test::nn_support::Tolerance kGrad{2e-7, 1e-5};
constexpr float kDLoss = 0.75f;

TEST(MseLossFusedHost, InvalidArgumentsThrowBeforeAnyLaunch) {
  // Fake device addresses: the checks come before the launch.
  auto* p = reinterpret_cast<float*>(std::uintptr_t{1} << 20);
  auto* counter = reinterpret_cast<unsigned int*>(std::uintptr_t{1} << 21);
  const auto message = [](auto&& call) {
    try {
      call();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] {
              kernels::launch_mse_loss_fused(p, p, p, 1, counter, p, p, 0, 1.0f,
                                             nn::GradMode::Overwrite, nullptr);
            }).find("empty batch"),
            std::string::npos);
  EXPECT_NE(message([&] {
              kernels::launch_mse_loss_fused(p, p, p, 1, counter, p, p, 5000, 1.0f,
                                             nn::GradMode::Overwrite, nullptr);
            }).find("partials hold 1 floats, need mse_loss_fused_partials_count(5000) = 3"),
            std::string::npos);
  EXPECT_NE(message([&] {
              kernels::launch_mse_loss_fused(p, p, p, 1, nullptr, p, p, 5, 1.0f,
                                             nn::GradMode::Overwrite, nullptr);
            }).find("counter is null"),
            std::string::npos);
  EXPECT_EQ(kernels::mse_loss_fused_partials_count(3000001), kernels::loss_partials_count(3000001));
}

std::uint32_t bits(float value) {
  std::uint32_t b = 0;
  std::memcpy(&b, &value, sizeof b);
  return b;
}

class MseLossFusedTest : public ::testing::TestWithParam<std::size_t> {};

TEST_P(MseLossFusedTest, MatchesTheReferenceAndTheTwoKernelLossDeterministically) {
  RESIDENT_REQUIRE_GPU();
  const std::size_t n = GetParam();
  const std::size_t partials_count = kernels::mse_loss_fused_partials_count(n);
  std::printf("  n %zu, %zu partials\n", n, partials_count);
  std::mt19937_64 rng(n * 29 + 5);
  Stream stream;
  const std::vector<float> p = random_floats(n, -2.0f, 2.0f, rng),
                           t = random_floats(n, -2.0f, 2.0f, rng);
  const std::vector<double> pd = to_double(p), td = to_double(t);
  DeviceBuffer<float> d_p(n), d_t(n), d_grad(n), d_loss(1), partials(partials_count);
  DeviceBuffer<unsigned int> counter(1);
  d_p.upload(p);
  d_t.upload(t);
  counter.upload(std::vector<unsigned int>{0});
  partials.upload(nans(partials_count));

  const double ref_loss = reference::mse_loss(pd, td);
  for (const nn::GradMode mode : {nn::GradMode::Overwrite, nn::GradMode::Accumulate}) {
    const bool accumulate = mode == nn::GradMode::Accumulate;
    SCOPED_TRACE(accumulate ? "Accumulate" : "Overwrite");
    const std::vector<float> start = accumulate ? random_floats(n, -1.0f, 1.0f, rng) : nans(n);
    std::vector<float> losses, first_grad;
    for (int run = 0; run < 3; ++run) {
      d_grad.upload(start);
      d_loss.upload(nans(1));
      kernels::launch_mse_loss_fused(d_loss.data(), d_grad.data(), partials.data(), partials_count,
                                     counter.data(), d_p.data(), d_t.data(), n, kDLoss, mode,
                                     stream.get());
      stream.synchronize();
      ASSERT_EQ(counter.download()[0], 0u) << "the ticket counter was not left at 0";
      losses.push_back(d_loss.download()[0]);
      if (run == 0) {
        first_grad = d_grad.download();
      } else {
        EXPECT_TRUE(bit_identical(d_grad.download(), first_grad)) << "run " << run;
      }
    }
    EXPECT_EQ(bits(losses[0]), bits(losses[1]));
    EXPECT_EQ(bits(losses[0]), bits(losses[2]));
    ASSERT_NO_FATAL_FAILURE(expect_close(losses[0], ref_loss, kLoss, "fused mse loss"));
    std::vector<double> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = accumulate ? start[i] : 0.0;
    reference::mse_loss_backward(pd, td, kDLoss, want,
                                 accumulate ? reference::GradMode::Accumulate
                                            : reference::GradMode::Overwrite);
    ASSERT_NO_FATAL_FAILURE(expect_close(first_grad, want, kGrad, "fused mse d_prediction"));

    // The two-kernel pair on the same inputs.
    DeviceBuffer<float> two_loss(1), two_partials(partials_count), two_grad(n);
    two_grad.upload(start);
    kernels::launch_mse_loss(two_loss.data(), two_partials.data(), partials_count, d_p.data(),
                             d_t.data(), n, stream.get());
    kernels::launch_mse_loss_backward(two_grad.data(), d_p.data(), d_t.data(), n, kDLoss, mode,
                                      stream.get());
    stream.synchronize();
    const float two = two_loss.download()[0];
    std::printf("    fused loss %.9g, two-kernel loss %.9g (%s)\n", losses[0], two,
                bits(two) == bits(losses[0]) ? "same bits" : "bits differ");
    EXPECT_NEAR(losses[0], two, 1e-6 * std::fabs(two) + 1e-12);
    EXPECT_TRUE(bit_identical(first_grad, two_grad.download()))
        << "the fused gradient differs from launch_mse_loss_backward's";
  }
}

INSTANTIATE_TEST_SUITE_P(EdgeSizes, MseLossFusedTest,
                         ::testing::Values(1, 31, 32, 33, 2047, 2048, 2049, 4097, 3000001),
                         [](const auto& test_case) {
                           return test::param_name("n", test_case.param);
                         });

TEST(MseLossFused, GraphReplaysRepeatTheEagerResultBitForBit) {
  RESIDENT_REQUIRE_GPU();
  const std::size_t n = 256 * 3;
  const std::size_t partials_count = kernels::mse_loss_fused_partials_count(n);
  std::mt19937_64 rng(99);
  Stream stream;
  DeviceBuffer<float> d_p(n), d_t(n), d_grad(n), d_loss(1), partials(partials_count);
  DeviceBuffer<unsigned int> counter(1);
  d_p.upload(random_floats(n, -2.0f, 2.0f, rng));
  d_t.upload(random_floats(n, -2.0f, 2.0f, rng));
  counter.upload(std::vector<unsigned int>{0});
  const auto launch = [&] {
    kernels::launch_mse_loss_fused(d_loss.data(), d_grad.data(), partials.data(), partials_count,
                                   counter.data(), d_p.data(), d_t.data(), n, 1.0f,
                                   nn::GradMode::Overwrite, stream.get());
  };
  launch();
  stream.synchronize();
  const float eager_loss = d_loss.download()[0];
  const std::vector<float> eager_grad = d_grad.download();

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  RESIDENT_CUDA_CHECK(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeGlobal));
  launch();
  RESIDENT_CUDA_CHECK(cudaStreamEndCapture(stream.get(), &graph));
  RESIDENT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 5; ++replay) {
    d_loss.upload(nans(1));
    d_grad.upload(nans(n));
    RESIDENT_CUDA_CHECK(cudaGraphLaunch(exec, stream.get()));
    stream.synchronize();
    EXPECT_EQ(bits(d_loss.download()[0]), bits(eager_loss)) << "replay " << replay;
    EXPECT_TRUE(bit_identical(d_grad.download(), eager_grad)) << "replay " << replay;
    EXPECT_EQ(counter.download()[0], 0u);
  }
  (void)cudaGraphExecDestroy(exec);
  (void)cudaGraphDestroy(graph);
}

}  // namespace
