// The sampler's fused residual block (kernels/models/diffusion/diffusion_fused_block.h) run on
// the host: its block programs (diffusion_fused_block.cuh, the code the GPU runs) executed phase
// by phase by HostBlock over the whole grid, in fp32, shared memory NaN-poisoned before each CTA.
// The weight transpose program is run first (its output must equal W^T exactly: a copy), and the
// block program then reads what it wrote. Compared with a plain double implementation of one
// residual block written here from the unfused sampler's five steps (DiffusionModel::sample:
// LayerNorm with gamma, beta, eps 1e-5 and the biased variance; fc1 = ln W1^T with W1 [out, in]
// row-major, no bias; z = (z + b1) + temb, a = silu(z); y = a W2^T; h = (h + y) + b2), over
// random h, weights, biases and a random temb row, at rows that are not a multiple of the 8-row
// tile (a partial last CTA) and widths 256 (the default), 37 (odd: the k remainder loop and
// padded shared rows), 300 (a second, partial column pass), 1024 (the largest) and 1.
// Tolerance |got - want| <= atol + rtol |want|, rtol 1e-4, atol 1e-5 (fp32 sums of at most 1024
// products in a fixed order against double). Rows past `rows` must stay untouched (a sentinel
// after h). Negative controls: a reference with GELU (tanh) instead of SiLU, one without the time
// embedding and one output element moved by 10 tolerances must each fail the same comparison.
// Also: the launchers refuse widths outside [1, 1024] and more than 32 matrices naming the value
// and the range, before anything is launched, and DiffusionConfig's switch is off by default,
// refused with a width above 1024 and named by describe() when on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/models/diffusion/diffusion_fused_block.cuh"
#include "lib/models/diffusion/diffusion_config.h"
#include "tests/models/support/agreement.h"
#include "tests/support/host_grid.h"

namespace {

namespace kd = resident::kernels::diffusion;

constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-5;
constexpr float kEps = 1e-5f;  // the model's kLayerNormEps
constexpr float kSentinel = 12345.0f;

struct Inputs {
  std::vector<float> h, gamma, beta, w1, b1, temb, w2, b2;  // w1, w2 [out, in]
};

std::vector<float> uniform(std::size_t n, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(u(rng));
  return v;
}

Inputs make_inputs(int rows, int D, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto d = static_cast<std::size_t>(D);
  Inputs in;
  in.h = uniform(static_cast<std::size_t>(rows) * d, -1.5, 1.5, rng);
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r)  // rows with their own offset
    for (std::size_t c = 0; c < d; ++c) in.h[r * d + c] += static_cast<float>(0.3 * (r % 5));
  in.gamma = uniform(d, 0.5, 1.5, rng);
  in.beta = uniform(d, -0.5, 0.5, rng);
  // U(-1.5/sqrt(D), +): z takes both signs (both branches of the sigmoid).
  const double bound = 1.5 / std::sqrt(static_cast<double>(D));
  in.w1 = uniform(d * d, -bound, bound, rng);
  in.b1 = uniform(d, -0.5, 0.5, rng);
  in.temb = uniform(d, -1.0, 1.0, rng);
  in.w2 = uniform(d * d, -bound, bound, rng);
  in.b2 = uniform(d, -0.5, 0.5, rng);
  return in;
}

// ----- the kernels' programs on the host

template <class Body>
void emulate_grid(long long blocks, int threads, long long smem_floats, Body body) {
  resident::test::emulate_host_grid<kd::HostBlock>(blocks, threads, smem_floats, body);
}

// h after the fused block; h holds `rows` rows then a sentinel row-tile (must survive).
std::vector<float> run_fused(int rows, int D, const Inputs& in) {
  const auto d = static_cast<std::size_t>(D);
  std::vector<float> wt(2 * d * d, std::numeric_limits<float>::quiet_NaN());
  kd::FusedWeightsArgs wa{};
  wa.wt = wt.data();
  wa.w[0] = in.w1.data();
  wa.w[1] = in.w2.data();
  wa.matrices = 2;
  wa.width = D;
  const int tiles = kd::fused_weights_tiles(D);
  emulate_grid(2LL * tiles * tiles, kd::kFusedWeightsThreads, kd::fused_weights_shared_floats(),
               [&](kd::HostBlock& b, float* s) { kd::fused_weights_program(b, wa, s); });
  for (std::size_t i = 0; i < d; ++i)
    for (std::size_t o = 0; o < d; ++o) {
      EXPECT_EQ(wt[i * d + o], in.w1[o * d + i]) << "W1^T at in " << i << ", out " << o;
      EXPECT_EQ(wt[d * d + i * d + o], in.w2[o * d + i]) << "W2^T at in " << i << ", out " << o;
    }

  std::vector<float> h = in.h;
  h.resize(h.size() + kd::kFusedBlockRows * d, kSentinel);
  const kd::FusedBlockArgs a{h.data(), in.gamma.data(), in.beta.data(), wt.data(),
                             in.b1.data(), in.temb.data(), wt.data() + d * d, in.b2.data(),
                             rows, D, kEps};
  emulate_grid(kd::fused_block_ctas(rows), kd::kFusedBlockThreads,
               kd::fused_block_shared_floats(D),
               [&](kd::HostBlock& b, float* s) { kd::fused_block_program(b, a, s); });
  for (std::size_t i = in.h.size(); i < h.size(); ++i)
    EXPECT_EQ(h[i], kSentinel) << "written past the rows at float " << i;
  h.resize(in.h.size());
  return h;
}

// ----- the double definition (from the unfused sampler's five steps, not from the kernel)

enum class RefVariant { Exact, Gelu, NoTemb };

std::vector<double> reference_block(int rows, int D, const Inputs& in, RefVariant variant) {
  const auto d = static_cast<std::size_t>(D);
  std::vector<double> out(static_cast<std::size_t>(rows) * d);
  std::vector<double> ln(d), act(d);
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    const float* h = in.h.data() + r * d;
    double mean = 0.0;
    for (std::size_t c = 0; c < d; ++c) mean += h[c];
    mean /= D;
    double var = 0.0;
    for (std::size_t c = 0; c < d; ++c) var += (h[c] - mean) * (h[c] - mean);
    var /= D;
    const double rstd = 1.0 / std::sqrt(var + static_cast<double>(kEps));
    for (std::size_t c = 0; c < d; ++c) ln[c] = (h[c] - mean) * rstd * in.gamma[c] + in.beta[c];
    for (std::size_t o = 0; o < d; ++o) {
      double z = 0.0;
      for (std::size_t i = 0; i < d; ++i) z += static_cast<double>(in.w1[o * d + i]) * ln[i];
      z += in.b1[o];
      if (variant != RefVariant::NoTemb) z += in.temb[o];
      if (variant == RefVariant::Gelu)
        act[o] = 0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z)));
      else
        act[o] = z / (1.0 + std::exp(-z));
    }
    for (std::size_t o = 0; o < d; ++o) {
      double y = 0.0;
      for (std::size_t i = 0; i < d; ++i) y += static_cast<double>(in.w2[o * d + i]) * act[i];
      out[r * d + o] = h[o] + y + in.b2[o];
    }
  }
  return out;
}

using resident::test::Agreement;

Agreement agreement(const std::vector<float>& got, const std::vector<double>& want) {
  return resident::test::agreement(got, want, kRtol, kAtol);
}

void check_case(int rows, int D, std::uint64_t seed) {
  const Inputs in = make_inputs(rows, D, seed);
  const std::vector<float> got = run_fused(rows, D, in);
  const std::vector<double> want = reference_block(rows, D, in, RefVariant::Exact);
  const Agreement a = agreement(got, want);
  std::printf(
      "D %d, rows %d (%lld CTAs of %d rows): h max |err| %.3e  share of tolerance %.3f (rtol "
      "%.0e, atol %.0e)\n",
      D, rows, static_cast<long long>(kd::fused_block_ctas(rows)), kd::kFusedBlockRows, a.max_abs,
      a.share, kRtol, kAtol);
  EXPECT_LE(a.share, 1.0) << "D " << D << ", rows " << rows << ": worst element " << a.worst
                          << " (row " << a.worst / static_cast<std::size_t>(D) << ", column "
                          << a.worst % static_cast<std::size_t>(D) << ") got " << got[a.worst]
                          << ", want " << want[a.worst];
}

TEST(DiffusionFusedBlockEmulation, DefaultWidth) { check_case(37, 256, 11); }

TEST(DiffusionFusedBlockEmulation, OddWidth) { check_case(13, 37, 12); }

TEST(DiffusionFusedBlockEmulation, WidthAboveOneColumnPass) { check_case(19, 300, 13); }

TEST(DiffusionFusedBlockEmulation, LargestWidth) { check_case(9, 1024, 14); }

TEST(DiffusionFusedBlockEmulation, OneRowOneColumn) { check_case(1, 1, 15); }

TEST(DiffusionFusedBlockEmulation, NegativeControlsFail) {
  const int rows = 21, D = 64;
  const Inputs in = make_inputs(rows, D, 16);
  const std::vector<float> got = run_fused(rows, D, in);
  const Agreement exact = agreement(got, reference_block(rows, D, in, RefVariant::Exact));
  EXPECT_LE(exact.share, 1.0);
  const Agreement gelu = agreement(got, reference_block(rows, D, in, RefVariant::Gelu));
  const Agreement no_temb = agreement(got, reference_block(rows, D, in, RefVariant::NoTemb));
  std::vector<double> moved = reference_block(rows, D, in, RefVariant::Exact);
  moved[100] += 10.0 * (kAtol + kRtol * std::fabs(moved[100]));
  const Agreement moved_a = agreement(got, moved);
  std::printf(
      "  exact share %.3f; against a GELU reference %.3f, without temb %.3f, one element moved "
      "%.3f (each must be > 1)\n",
      exact.share, gelu.share, no_temb.share, moved_a.share);
  EXPECT_GT(gelu.share, 1.0);
  EXPECT_GT(no_temb.share, 1.0);
  EXPECT_GT(moved_a.share, 1.0);
}

// Sizes outside the kernels' ranges are refused with the value and the range, before a launch.
TEST(DiffusionFusedBlockEmulation, LaunchersRefuseSizesOutOfRange) {
  std::vector<float> dummy(4, 0.0f);
  float* p = dummy.data();
  for (const std::size_t width : {std::size_t{0}, std::size_t{1025}}) {
    try {
      kd::launch_diffusion_fused_block(p, p, p, p, p, p, p, p, 8, width, kEps, nullptr);
      ADD_FAILURE() << "width " << width << " accepted";
    } catch (const resident::Error& e) {
      const std::string what = e.what();
      std::printf("  width %zu: %s\n", width, what.c_str());
      EXPECT_NE(what.find("width = " + std::to_string(width)), std::string::npos) << what;
      EXPECT_NE(what.find("[1, 1024]"), std::string::npos) << what;
    }
  }
  const float* w[1] = {p};
  EXPECT_THROW(kd::launch_diffusion_fused_weights(p, w, 1, 1025, nullptr), resident::Error);
  EXPECT_THROW(kd::launch_diffusion_fused_weights(p, w, 0, 4, nullptr), resident::Error);
  EXPECT_THROW(kd::launch_diffusion_fused_weights(p, w, 33, 4, nullptr), resident::Error);
  EXPECT_THROW(kd::launch_diffusion_fused_block(p, p, p, p, p, p, p, p, 8, 4, 0.0f, nullptr),
               resident::Error);
}

// The switch: off by default; describe() (part of a checkpoint's fingerprint) names it when on;
// a width the kernel cannot take is refused by the config's validation.
TEST(DiffusionFusedBlockEmulation, ConfigSwitchIsOffByDefaultAndDescribed) {
  namespace rm = resident::models;
  const rm::ModelShape shape{64, 32, 1, 256};
  rm::DiffusionConfig c;
  EXPECT_FALSE(c.fused_sampler_blocks);
  const std::string plain = rm::describe_diffusion(c, shape);
  EXPECT_EQ(plain.find("fused"), std::string::npos) << plain;
  c.fused_sampler_blocks = true;
  EXPECT_EQ(rm::describe_diffusion(c, shape), plain + ", fused sampler blocks");
  EXPECT_NO_THROW(rm::validate_diffusion_config(c, shape));
  c.width = 1025;
  try {
    rm::validate_diffusion_config(c, shape);
    ADD_FAILURE() << "width 1025 with fused_sampler_blocks accepted";
  } catch (const resident::Error& e) {
    const std::string what = e.what();
    std::printf("  %s\n", what.c_str());
    EXPECT_NE(what.find("1025"), std::string::npos) << what;
    EXPECT_NE(what.find("[1, 1024]"), std::string::npos) << what;
  }
  c.fused_sampler_blocks = false;
  EXPECT_NO_THROW(rm::validate_diffusion_config(c, shape));
  EXPECT_EQ(resident::models::kDiffusionFusedMaxWidth, kd::kFusedBlockMaxWidth);
}

}  // namespace
