// Global gradient norm and clip scale against the double-precision reference (global_norm,
// clip_global_norm): the kernel at sizes 0, 1, 63, 64, 65, 4097, 1e6, 1e6 + 3 (float4 groups and
// every tail length), and the slab's call over tensors with padding between them. Fresh random
// inputs in [-1, 1]; outputs and scratch poisoned with NaN before each run.
//
// Tolerance: both outputs are fp64 results rounded once to fp32, so |gpu - ref| <= 2^-24 |ref|
// (half an ulp) + 1e-9 |ref| (fp64 summation order, far below an fp32 ulp). Also bit-for-bit
// determinism between two runs, and max_norm = +inf never clips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/nn/global_norm.h"
#include "lib/core/device_buffer.h"
#include "lib/core/scalar_readback.h"
#include "lib/core/stream.h"
#include "lib/nn/param_slab.h"
#include "tests/reference/nn_reference.h"
#include "tests/support/gpu.h"
#include "tests/support/param_name.h"

namespace {

using namespace resident;
namespace ref = resident::reference;

constexpr double kHalfUlp = 0x1p-24;
constexpr double kSumOrder = 1e-9;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> random_floats(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = value(rng);
  return v;
}

// Checks |got - want| <= (half ulp + sum order) |want| and returns the share of it used.
double expect_fp32_rounding(float got, double want, const char* what) {
  const double tolerance = (kHalfUlp + kSumOrder) * std::fabs(want);
  const double error = std::fabs(static_cast<double>(got) - want);
  EXPECT_TRUE(error <= tolerance) << what << ": gpu " << got << ", ref " << want << ", error "
                                  << error << " > " << tolerance;
  if (tolerance > 0) return error / tolerance;
  return error == 0 ? 0.0 : std::numeric_limits<double>::infinity();
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

struct NormResult {
  float norm;
  float scale;
};

NormResult run_kernel(const DeviceBuffer<float>& grads, float max_norm, const Stream& stream) {
  DeviceBuffer<float> out(2);
  DeviceBuffer<double> partials(kernels::global_norm_partial_count(grads.size()));
  out.upload(std::vector<float>{kNaN, kNaN});
  partials.upload(std::vector<double>(partials.size(), std::numeric_limits<double>::quiet_NaN()));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // legacy-stream uploads before `stream`
  kernels::launch_global_norm(out.data(), out.data() + 1, partials.data(), grads.data(),
                              grads.size(), max_norm, stream.get());
  stream.synchronize();
  const std::vector<float> host = out.download();
  return {host[0], host[1]};
}

class GlobalNormKernel : public ::testing::TestWithParam<std::size_t> {};

TEST_P(GlobalNormKernel, MatchesTheReferenceToFp32Rounding) {
  RESIDENT_REQUIRE_GPU();
  const std::size_t n = GetParam();
  std::mt19937_64 rng(0x5EED0000 + n);
  const std::vector<float> g = random_floats(n, rng);
  const std::vector<double> g_ref(g.begin(), g.end());
  const double ref_norm = ref::global_norm(g_ref);
  DeviceBuffer<float> d_g(n);
  if (n > 0) d_g.upload(g);
  const Stream stream;

  // Clipping (max_norm a third of the norm), not clipping (three times it), never (+inf).
  const float clipping = n > 0 ? static_cast<float>(ref_norm / 3) : 1.0f;
  const float roomy = n > 0 ? static_cast<float>(ref_norm * 3) : 1.0f;
  double worst = 0;
  for (const float max_norm : {clipping, roomy, kInf}) {
    std::vector<double> clipped = g_ref;
    const double ref_scale = ref::clip_global_norm(clipped, static_cast<double>(max_norm));
    const NormResult got = run_kernel(d_g, max_norm, stream);
    worst = std::max(worst, expect_fp32_rounding(got.norm, ref_norm, "norm"));
    worst = std::max(worst, expect_fp32_rounding(got.scale, ref_scale, "scale"));
    if (max_norm == roomy || max_norm == kInf) EXPECT_EQ(got.scale, 1.0f);
    if (n > 0 && max_norm == clipping) EXPECT_LT(got.scale, 1.0f);
    const NormResult again = run_kernel(d_g, max_norm, stream);
    EXPECT_TRUE(same_bits(got.norm, again.norm) && same_bits(got.scale, again.scale))
        << "two runs differ: norm " << got.norm << " vs " << again.norm;
    std::printf(
        "  n %8zu  max_norm %-12g norm %.9g (ref %.12g)  scale %.9g (ref %.12g)%s\n", n,
        static_cast<double>(max_norm), static_cast<double>(got.norm), ref_norm,
        static_cast<double>(got.scale), ref_scale,
        got.norm == static_cast<float>(ref_norm) && got.scale == static_cast<float>(ref_scale)
            ? "  (both = fp32(ref))"
            : "");
  }
  std::printf("  n %8zu  worst %.0f%% of tolerance\n", n, 100 * worst);
}

INSTANTIATE_TEST_SUITE_P(EdgeSizes, GlobalNormKernel,
                         ::testing::Values(0, 1, 63, 64, 65, 4097, 1000000, 1000003),
                         [](const auto& test_case) {
                           return test::param_name("n", test_case.param);
                         });

TEST(GlobalNormKernel, RejectsANonPositiveMaxNorm) {
  RESIDENT_REQUIRE_GPU();
  DeviceBuffer<float> g(64), out(2);
  DeviceBuffer<double> partials(kernels::global_norm_partial_count(64));
  for (const float bad : {0.0f, -1.0f, kNaN})
    EXPECT_THROW(kernels::launch_global_norm(out.data(), out.data() + 1, partials.data(), g.data(),
                                             64, bad, nullptr),
                 Error);
}

// The slab's call: tensors of 1, 63 and 65 elements with zero padding between them.
TEST(ParamSlabGlobalNorm, MatchesTheReferenceOverTheTensors) {
  RESIDENT_REQUIRE_GPU();
  nn::ParamSlab slab;
  slab.add("one", {1}, false);
  slab.add("odd", {7, 9}, true);
  slab.add("over", {5, 13}, false);
  slab.finalize();
  const Stream stream;
  std::mt19937_64 rng(0x5EED5AB);
  std::vector<double> g_ref;
  for (const nn::SlabTensor& t : slab.layout().tensors()) {
    const std::vector<float> values = random_floats(t.size, rng);
    slab.upload(nn::SlabPart::Grads, t.name, values, stream.get());
    g_ref.insert(g_ref.end(), values.begin(), values.end());
  }
  const double ref_norm = ref::global_norm(g_ref);
  ScalarReadback<float> norm, scale;
  for (const float max_norm : {static_cast<float>(ref_norm / 2), kInf}) {
    std::vector<double> clipped = g_ref;
    const double ref_scale = ref::clip_global_norm(clipped, static_cast<double>(max_norm));
    slab.global_grad_norm_and_clip(max_norm, stream.get());
    norm.enqueue(slab.grad_norm(), stream.get());
    const float got_norm = norm.wait();
    scale.enqueue(slab.clip_scale(), stream.get());
    const float got_scale = scale.wait();
    expect_fp32_rounding(got_norm, ref_norm, "slab norm");
    expect_fp32_rounding(got_scale, ref_scale, "slab scale");
    std::printf("  slab: max_norm %g  norm %.9g (ref %.12g)  scale %.9g (ref %.12g)\n",
                static_cast<double>(max_norm), static_cast<double>(got_norm), ref_norm,
                static_cast<double>(got_scale), ref_scale);
  }
  // The grads are not rewritten by clipping.
  const std::vector<float> after = slab.download(nn::SlabPart::Grads, stream.get());
  std::size_t k = 0;
  for (const nn::SlabTensor& t : slab.layout().tensors())
    for (std::size_t i = 0; i < t.size; ++i, ++k)
      ASSERT_EQ(static_cast<double>(after[t.offset + i]), g_ref[k]) << t.name << "[" << i << "]";
  EXPECT_THROW(slab.global_grad_norm_and_clip(0.0f, stream.get()), Error);
}

}  // namespace
