// Dropout on the GPU.
//  - The keep mask is exactly the documented function of the key: element i kept iff draw i % 4
//    of Philox subsequence i / 4 (CPU reference::curand_philox_draw) is below
//    dropout_keep_threshold(p); mask values are 0 or 1.
//  - Reproducible: the same key gives the same mask and y bit for bit; another seed or another
//    offset gives a mask that differs in a share of positions within sampling error of the
//    2 p (1 - p) that independent masks would.
//  - Keep rate within 5 standard deviations of p (n = 1000003, p = 0.1, 0.5, 0.9, three keys
//    each); negative control: the same statistic rejects p + 0.01 and p - 0.01 (power to see a
//    1% bias).
//  - Forward and backward (both grad modes) equal the reference given the GPU's own mask, at
//    sizes 1, 31, 32, 33, 1000003 and p = 0.3, 0.5, 0.8, 1; p = 1 is the identity bit for bit.
// Fresh random inputs in [-1, 1]; y poisoned with NaN and the mask with 0xFF, dx with NaN
// (overwrite) or random values (accumulate). Tolerance |gpu - ref| <= atol + rtol * |ref| with
// atol 1e-7, rtol 1e-6 (a product by the fp32 value of 1/p, and the accumulate sum).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/core/philox.h"
#include "kernels/nn/dropout.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "tests/nn/nn_test_support.h"
#include "tests/reference/nn_reference.h"
#include "tests/reference/philox_reference.h"
#include "tests/support/gpu.h"
#include "tests/support/param_name.h"

namespace {

using namespace resident;
using test::nn_support::expect_close;
using test::nn_support::random_floats;
using test::nn_support::to_double;

constexpr double kAtol = 1e-7;
constexpr double kRtol = 1e-6;
constexpr std::size_t kLarge = 1000003;
constexpr double kMaxZ = 5.0;  // two-sided, about 6e-7 false-alarm rate per pinned-seed check

// The mask the contract in kernels/nn/dropout.h promises, from the CPU Philox reference.
std::vector<std::uint8_t> expected_mask(std::size_t n, float keep_probability, PhiloxKey key) {
  const std::uint64_t threshold = kernels::dropout_keep_threshold(keep_probability);
  std::vector<std::uint8_t> mask(n);
  for (std::size_t i = 0; i < n; ++i)
    mask[i] = std::uint64_t{reference::curand_philox_draw(key.seed, i / 4, key.offset, i % 4)} < threshold;
  return mask;
}

// Runs the forward on poisoned outputs; returns y and the mask.
struct ForwardResult {
  std::vector<float> y;
  std::vector<std::uint8_t> mask;
};

ForwardResult run_forward(const DeviceBuffer<float>& d_x, float keep_probability, PhiloxKey key,
                          const Stream& stream) {
  const std::size_t n = d_x.size();
  DeviceBuffer<float> d_y(n);
  DeviceBuffer<std::uint8_t> d_mask(n);
  d_y.upload(std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
  d_mask.upload(std::vector<std::uint8_t>(n, 0xFF));
  kernels::launch_dropout_forward(d_y.data(), d_mask.data(), d_x.data(), n, keep_probability, key,
                                  stream.get());
  stream.synchronize();
  return {d_y.download(), d_mask.download()};
}

std::size_t count_kept(const std::vector<std::uint8_t>& mask) {
  return static_cast<std::size_t>(std::count(mask.begin(), mask.end(), std::uint8_t{1}));
}

// z-score of `kept` successes out of n under Binomial(n, p).
double keep_rate_z(std::size_t kept, std::size_t n, double p) {
  const double nd = static_cast<double>(n);
  return (static_cast<double>(kept) - nd * p) / std::sqrt(nd * p * (1.0 - p));
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(DropoutKeepThreshold, QuantizesTheKeepProbabilityToThirtyTwoBits) {
  EXPECT_EQ(kernels::dropout_keep_threshold(1.0f), std::uint64_t{1} << 32);
  EXPECT_EQ(kernels::dropout_keep_threshold(0.5f), std::uint64_t{1} << 31);
  EXPECT_EQ(kernels::dropout_keep_threshold(0.25f), std::uint64_t{1} << 30);
  EXPECT_EQ(kernels::dropout_keep_threshold(0.1f),
            static_cast<std::uint64_t>(std::llround(static_cast<double>(0.1f) * 4294967296.0)));
}

TEST(Dropout, RejectsKeepProbabilitiesOutsideZeroToOne) {
  // Host-side checks before any launch: need no device.
  for (const float p : {0.0f, -0.5f, 1.5f, std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_THROW(kernels::launch_dropout_forward(nullptr, nullptr, nullptr, 0, p, {}, nullptr), Error) << p;
    EXPECT_THROW(kernels::launch_dropout_backward(nullptr, nullptr, nullptr, 0, p,
                                                  nn::GradMode::Overwrite, nullptr),
                 Error)
        << p;
  }
}

TEST(DropoutMask, IsTheDocumentedFunctionOfTheKeyAndReproducible) {
  RESIDENT_REQUIRE_GPU();
  std::mt19937_64 rng(7001);
  Stream stream;
  const std::vector<float> x = random_floats(kLarge, -1.0f, 1.0f, rng);
  DeviceBuffer<float> d_x(kLarge);
  d_x.upload(x);
  const float p = 0.5f;
  PhiloxStream philox(2024, 3);
  const PhiloxKey key = philox.next(kernels::kDropoutDrawsPerSubsequence);
  const PhiloxKey next_offset = philox.next(kernels::kDropoutDrawsPerSubsequence);
  const PhiloxKey other_seed{mix_seed(2024, 4), key.offset};
  const PhiloxKey odd_offset{key.seed, 6};  // not a whole Philox block: draws follow stream order

  const ForwardResult first = run_forward(d_x, p, key, stream);
  const ForwardResult again = run_forward(d_x, p, key, stream);
  EXPECT_EQ(first.mask, again.mask) << "same key, different mask";
  EXPECT_TRUE(same_bits(first.y, again.y)) << "same key, different y";
  EXPECT_EQ(first.mask, expected_mask(kLarge, p, key)) << "mask is not the documented Philox function";

  for (const PhiloxKey other : {next_offset, other_seed, odd_offset}) {
    const ForwardResult result = run_forward(d_x, p, other, stream);
    EXPECT_EQ(result.mask, expected_mask(kLarge, p, other))
        << "seed " << other.seed << " offset " << other.offset;
    std::size_t differing = 0;
    for (std::size_t i = 0; i < kLarge; ++i) differing += first.mask[i] != result.mask[i];
    // Independent masks differ at each position with probability 2 p (1 - p).
    const double z = keep_rate_z(differing, kLarge, 2.0 * p * (1.0 - p));
    std::printf("  offset %llu: %zu of %zu positions differ from the first key's mask, z = %.2f\n",
                static_cast<unsigned long long>(other.offset), differing, kLarge, z);
    EXPECT_LT(std::fabs(z), kMaxZ) << "masks of two keys are not independent-looking";
  }
}

TEST(DropoutMask, KeepRateIsWithinSamplingErrorOfP) {
  RESIDENT_REQUIRE_GPU();
  std::mt19937_64 rng(7002);
  Stream stream;
  DeviceBuffer<float> d_x(kLarge);
  d_x.upload(random_floats(kLarge, -1.0f, 1.0f, rng));
  PhiloxStream philox(99, 0);
  for (const float p : {0.1f, 0.5f, 0.9f}) {
    for (int trial = 0; trial < 3; ++trial) {
      const ForwardResult result = run_forward(d_x, p, philox.next(kernels::kDropoutDrawsPerSubsequence), stream);
      const std::size_t kept = count_kept(result.mask);
      const double z = keep_rate_z(kept, kLarge, p);
      std::printf("  p %.2f trial %d: kept %zu of %zu (rate %.5f), z = %.2f\n", p, trial, kept, kLarge,
                  static_cast<double>(kept) / kLarge, z);
      EXPECT_LT(std::fabs(z), kMaxZ) << "p " << p << " trial " << trial;
      // Negative control: the same statistic must reject a keep rate off by 0.01.
      EXPECT_GT(std::fabs(keep_rate_z(kept, kLarge, p + 0.01)), kMaxZ) << "no power at p " << p;
      EXPECT_GT(std::fabs(keep_rate_z(kept, kLarge, p - 0.01)), kMaxZ) << "no power at p " << p;
    }
  }
}

class DropoutTest : public ::testing::TestWithParam<std::tuple<std::size_t, float>> {};

TEST_P(DropoutTest, ForwardAndBackwardMatchTheReferenceGivenTheMask) {
  RESIDENT_REQUIRE_GPU();
  const auto [n, p] = GetParam();
  std::printf("  n %zu, keep probability %.2f\n", n, p);
  std::mt19937_64 rng(n * 31 + static_cast<std::uint64_t>(p * 100));
  Stream stream;
  const std::vector<float> x = random_floats(n, -1.0f, 1.0f, rng), dy = random_floats(n, -1.0f, 1.0f, rng);
  DeviceBuffer<float> d_x(n), d_dy(n), d_dx(n);
  DeviceBuffer<std::uint8_t> d_mask(n);
  d_x.upload(x);
  d_dy.upload(dy);
  PhiloxStream philox(n, 1);
  philox.next(kernels::kDropoutDrawsPerSubsequence);  // a key with a non-zero offset
  const PhiloxKey key = philox.next(kernels::kDropoutDrawsPerSubsequence);

  const ForwardResult forward = run_forward(d_x, p, key, stream);
  for (std::size_t i = 0; i < n; ++i) ASSERT_LE(forward.mask[i], 1) << "mask[" << i << "]";
  std::printf("    kept %zu of %zu\n", count_kept(forward.mask), n);
  expect_close(forward.y, reference::dropout_forward(to_double(x), forward.mask, p), {kAtol, kRtol}, "y");
  if (p == 1.0f) {
    EXPECT_EQ(count_kept(forward.mask), n) << "p = 1 must keep everything";
    EXPECT_TRUE(same_bits(forward.y, x)) << "p = 1 must be the identity";
  }

  d_mask.upload(forward.mask);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const nn::GradMode mode : {nn::GradMode::Overwrite, nn::GradMode::Accumulate}) {
    const bool acc = mode == nn::GradMode::Accumulate;
    const std::vector<float> dx0 = acc ? random_floats(n, -1.0f, 1.0f, rng) : std::vector<float>(n, nan);
    d_dx.upload(dx0);
    kernels::launch_dropout_backward(d_dx.data(), d_mask.data(), d_dy.data(), n, p, mode, stream.get());
    stream.synchronize();
    const std::vector<float> dx = d_dx.download();
    std::vector<double> rdx = to_double(dx0);
    reference::dropout_backward(forward.mask, p, to_double(dy), rdx,
                                acc ? reference::GradMode::Accumulate : reference::GradMode::Overwrite);
    expect_close(dx, rdx, {kAtol, kRtol}, acc ? "dx acc" : "dx");
    if (p == 1.0f && !acc) EXPECT_TRUE(same_bits(dx, dy)) << "p = 1 backward must be the identity";
  }
}

INSTANTIATE_TEST_SUITE_P(EdgeSizes, DropoutTest,
                         ::testing::Combine(::testing::Values<std::size_t>(1, 31, 32, 33, kLarge),
                                            ::testing::Values(0.3f, 0.5f, 0.8f, 1.0f)),
                         [](const auto& test_case) {
                           const auto& p = test_case.param;
                           return test::param_name("n", std::get<0>(p), "keep", std::get<1>(p));
                         });

}  // namespace
