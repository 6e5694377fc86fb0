// ParamSlab::adamw_step (the fused kernel) against the double-precision reference adamw_step over
// several steps: fresh random params in [-1, 1] and fresh random grads in [-1, 1] every step, over
// a slab of odd-sized tensors with padding between them (one of 77k elements, so the grid
// strides), without weight decay, with decay on a mask of tensors, and with global-norm clipping
// (active, and inactive with a roomy max_norm) feeding the scale to the update on the device.
//
// Tolerance |gpu - ref| <= atol + rtol |ref| with rtol 1e-5 for all three of params, m and v (fp32
// arithmetic over 5 steps; every constant is rounded once from fp64, so the error is a few ulp),
// atol 1e-6 for params and m (cancellation near 0), 1e-15 for v (v >= 0 has no cancellation, so
// its error is relative). The clip norm
// and scale are checked to fp32 rounding as in global_norm_test.
//
// Also: a CUDA-graph capture of zero_grads + (grads from the device step) + clip + adamw_step
// must succeed, and N replays must equal N eager steps bit for bit (params, m, v, step, norm).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "lib/core/error.h"
#include "lib/core/scalar_readback.h"
#include "lib/core/stream.h"
#include "lib/nn/param_slab.h"
#include "tests/reference/nn_reference.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident;
namespace ref = resident::reference;

constexpr double kRtol = 1e-5;
constexpr double kAtolParams = 1e-6;
constexpr double kAtolM = 1e-6;
constexpr double kAtolV = 1e-15;
constexpr double kNormTolerance = 0x1p-24 + 1e-9;  // relative: fp32 rounding of an fp64 result
constexpr std::size_t kSteps = 5;

// The test model: odd sizes, both decay flags, a scalar, and one tensor large enough that the
// kernel's grid strides.
void declare_tensors(nn::ParamSlab& slab) {
  slab.add("w1", {33, 17}, true);
  slab.add("b1", {33}, false);
  slab.add("w2", {5, 33}, true);
  slab.add("scalar", {1}, false);
  slab.add("big", {257, 300}, true);
}

// Values in [-1, 1] inside the tensors, 0 in the padding.
std::vector<float> random_slab(const nn::SlabLayout& layout, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> v(layout.total_elements(), 0.0f);
  for (const nn::SlabTensor& t : layout.tensors())
    for (std::size_t i = 0; i < t.size; ++i) v[t.offset + i] = value(rng);
  return v;
}

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

double expect_close(const std::vector<float>& got, const std::vector<double>& want, double atol,
                    const char* what, std::size_t step) {
  EXPECT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double tolerance = atol + kRtol * std::fabs(want[i]);
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(error <= tolerance)) {
      ADD_FAILURE() << what << "[" << i << "] after step " << step << ": gpu " << got[i] << ", ref "
                    << want[i] << ", error " << error << " > " << tolerance;
      return std::numeric_limits<double>::infinity();
    }
    worst = std::max(worst, error / tolerance);
  }
  return worst;
}

struct AdamWCase {
  const char* name;
  double weight_decay;
  float max_norm;  // 0: no clipping call
};

class AdamWTest : public ::testing::TestWithParam<AdamWCase> {};

TEST_P(AdamWTest, SeveralStepsMatchTheReference) {
  RESIDENT_REQUIRE_GPU();
  const AdamWCase c = GetParam();
  nn::ParamSlab slab;
  declare_tensors(slab);
  slab.finalize();
  const nn::SlabLayout& layout = slab.layout();
  const Stream stream;
  std::mt19937_64 rng(0xADA5EED);

  const nn::AdamWConfig config{
      .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = c.weight_decay};
  const ref::AdamWConfig ref_config{.lr = config.lr,
                                    .beta1 = config.beta1,
                                    .beta2 = config.beta2,
                                    .eps = config.eps,
                                    .weight_decay = config.weight_decay};
  const std::vector<std::uint8_t> mask = layout.decay_mask();
  const std::vector<float> p0 = random_slab(layout, rng);
  slab.upload(nn::SlabPart::Params, p0, stream.get());
  std::vector<double> p = to_double(p0), m(p.size(), 0.0), v(p.size(), 0.0);

  ScalarReadback<float> norm_readback, scale_readback;
  double worst_p = 0, worst_m = 0, worst_v = 0, worst_norm = 0;
  for (std::size_t step = 1; step <= kSteps; ++step) {
    const std::vector<float> g = random_slab(layout, rng);
    slab.upload(nn::SlabPart::Grads, g, stream.get());
    std::vector<double> g_ref = to_double(g);
    if (c.max_norm > 0) {
      const double ref_norm = ref::global_norm(g_ref);
      const double ref_scale = ref::clip_global_norm(g_ref, static_cast<double>(c.max_norm));
      slab.global_grad_norm_and_clip(c.max_norm, stream.get());
      norm_readback.enqueue(slab.grad_norm(), stream.get());
      scale_readback.enqueue(slab.clip_scale(), stream.get());
      const float got_norm = norm_readback.wait();
      const float got_scale = scale_readback.wait();
      for (const auto& [got, want, what] :
           {std::tuple{got_norm, ref_norm, "norm"}, std::tuple{got_scale, ref_scale, "scale"}}) {
        const double error = std::fabs(static_cast<double>(got) - want);
        EXPECT_LE(error, kNormTolerance * std::fabs(want)) << what << " at step " << step;
        worst_norm = std::max(worst_norm, error / (kNormTolerance * std::fabs(want)));
      }
      if (step == 1)
        std::printf("  clip: norm %.7g, max_norm %g, scale %.7g\n", static_cast<double>(got_norm),
                    static_cast<double>(c.max_norm), static_cast<double>(got_scale));
    }
    slab.adamw_step(config, stream.get());
    ref::adamw_step(ref_config, step, p, g_ref, m, v, mask);

    worst_p = std::max(worst_p, expect_close(slab.download(nn::SlabPart::Params, stream.get()), p,
                                             kAtolParams, "params", step));
    worst_m = std::max(worst_m, expect_close(slab.download(nn::SlabPart::AdamM, stream.get()), m,
                                             kAtolM, "m", step));
    worst_v = std::max(worst_v, expect_close(slab.download(nn::SlabPart::AdamV, stream.get()), v,
                                             kAtolV, "v", step));
    EXPECT_EQ(slab.read_step(stream.get()), step);
  }
  // The update did move every parameter (a kernel that skipped elements would show here too).
  const std::vector<float> p_end = slab.download(nn::SlabPart::Params, stream.get());
  for (const nn::SlabTensor& t : layout.tensors())
    for (std::size_t i = 0; i < t.size; ++i)
      ASSERT_NE(p_end[t.offset + i], p0[t.offset + i]) << t.name << "[" << i << "] did not move";
  // Padding stays exactly zero.
  std::vector<bool> inside(p_end.size(), false);
  for (const nn::SlabTensor& t : layout.tensors())
    std::fill_n(inside.begin() + static_cast<std::ptrdiff_t>(t.offset), t.size, true);
  for (std::size_t i = 0; i < p_end.size(); ++i)
    if (!inside[i]) ASSERT_EQ(p_end[i], 0.0f) << "padding element " << i;
  std::printf(
      "  %-14s %zu steps over %zu elements: worst params %.0f%%, m %.0f%%, v %.0f%%, "
      "norm/scale %.0f%% of tolerance\n",
      c.name, kSteps, layout.total_elements(), 100 * worst_p, 100 * worst_m, 100 * worst_v,
      100 * worst_norm);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AdamWTest,
    ::testing::Values(AdamWCase{"plain", 0.0, 0.0f}, AdamWCase{"decay_mask", 0.1, 0.0f},
                      AdamWCase{"clip", 0.1, 20.0f},           // norm ~ 160: always clips
                      AdamWCase{"clip_inactive", 0.1, 1e6f}),  // scale 1
    [](const auto& info) { return std::string(info.param.name); });

// Negative controls: the tolerance above is tight enough to see a bias correction off by one step
// and a weight decay that was not applied.
TEST(AdamW, TheToleranceSeesAWrongStepOrAMissingDecay) {
  RESIDENT_REQUIRE_GPU();
  nn::ParamSlab slab;
  declare_tensors(slab);
  slab.finalize();
  const Stream stream;
  std::mt19937_64 rng(0xC0);
  const std::vector<float> p0 = random_slab(slab.layout(), rng),
                           g = random_slab(slab.layout(), rng);
  slab.upload(nn::SlabPart::Params, p0, stream.get());
  slab.upload(nn::SlabPart::Grads, g, stream.get());
  const nn::AdamWConfig config{.lr = 1e-2, .weight_decay = 0.1};
  slab.adamw_step(config, stream.get());
  const std::vector<float> got = slab.download(nn::SlabPart::Params, stream.get());
  const std::vector<std::uint8_t> mask = slab.layout().decay_mask();

  auto violations = [&](std::uint64_t step, double weight_decay) {
    std::vector<double> p = to_double(p0), m(p.size(), 0.0), v(p.size(), 0.0);
    ref::adamw_step({.lr = 1e-2, .weight_decay = weight_decay}, step, p, to_double(g), m, v, mask);
    std::size_t count = 0;
    for (std::size_t i = 0; i < p.size(); ++i)
      if (!(std::fabs(static_cast<double>(got[i]) - p[i]) <= kAtolParams + kRtol * std::fabs(p[i])))
        ++count;
    return count;
  };
  EXPECT_EQ(violations(1, 0.1), 0u) << "the right reference must pass";
  const std::size_t wrong_step = violations(2, 0.1), no_decay = violations(1, 0.0);
  EXPECT_GT(wrong_step, 0u) << "a bias correction off by one step went unnoticed";
  EXPECT_GT(no_decay, 0u) << "a missing weight decay went unnoticed";
  std::printf("  negative controls: step 2 instead of 1 fails %zu elements, no decay %zu\n",
              wrong_step, no_decay);
}

TEST(AdamW, InvalidConfigThrowsAndChangesNothing) {
  RESIDENT_REQUIRE_GPU();
  nn::ParamSlab slab;
  declare_tensors(slab);
  const Stream stream;
  EXPECT_THROW(slab.adamw_step({}, stream.get()), Error);  // before finalize
  slab.finalize();
  for (const nn::AdamWConfig bad :
       {nn::AdamWConfig{.lr = -1.0}, nn::AdamWConfig{.lr = std::nan("")},
        nn::AdamWConfig{.beta1 = 1.0}, nn::AdamWConfig{.beta2 = -0.1}, nn::AdamWConfig{.eps = 0.0},
        nn::AdamWConfig{.weight_decay = -0.5}})
    EXPECT_THROW(slab.adamw_step(bad, stream.get()), Error);
  EXPECT_EQ(slab.read_step(stream.get()), 0u);
}

// ---------------------------------------------------------------------------------------------
// Graph capture: zero_grads, grads written from the device step (so every replay differs),
// clip, AdamW.

__global__ void fill_grads_from_step(float* grads, std::size_t n, std::uint32_t salt,
                                     const std::uint64_t* step) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^
                    static_cast<std::uint32_t>(*step) * 40503u ^ salt * 97u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  grads[i] = 2.0f * (static_cast<float>(h >> 8) * 0x1p-24f) - 1.0f;  // [-1, 1)
}

void train_step(nn::ParamSlab& slab, const nn::AdamWConfig& config, float max_norm,
                cudaStream_t stream) {
  slab.zero_grads(stream);
  std::uint32_t salt = 0;
  for (const nn::SlabTensor& t : slab.layout().tensors()) {
    fill_grads_from_step<<<static_cast<unsigned>((t.size + 255) / 256), 256, 0, stream>>>(
        slab.grad(t.name), t.size, salt++, slab.step_counter());
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  }
  slab.global_grad_norm_and_clip(max_norm, stream);
  slab.adamw_step(config, stream);
}

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  std::size_t differing = 0, first = a.size();
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      if (differing++ == 0) first = i;
    }
  EXPECT_EQ(differing, 0u) << what << ": " << differing << " elements differ, first [" << first
                           << "]: graph " << a[first] << ", eager " << b[first];
}

TEST(AdamW, GraphReplaysEqualEagerStepsBitForBit) {
  RESIDENT_REQUIRE_GPU();
  constexpr std::size_t kReplays = 7;
  constexpr float kMaxNorm = 20.0f;  // the grads' norm is ~160: clipping is active
  const nn::AdamWConfig config{.lr = 3e-3, .weight_decay = 0.05};
  nn::ParamSlab graphed, eager;
  declare_tensors(graphed);
  declare_tensors(eager);
  graphed.finalize();
  eager.finalize();
  const Stream graph_stream, eager_stream;
  std::mt19937_64 rng(0x6A4F);
  const std::vector<float> p0 = random_slab(graphed.layout(), rng);
  graphed.upload(nn::SlabPart::Params, p0, graph_stream.get());
  eager.upload(nn::SlabPart::Params, p0, eager_stream.get());

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(graph_stream.get(), cudaStreamCaptureModeGlobal), cudaSuccess);
  train_step(graphed, config, kMaxNorm, graph_stream.get());  // host interaction fails capture
  ASSERT_EQ(cudaStreamEndCapture(graph_stream.get(), &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  EXPECT_EQ(graphed.read_step(graph_stream.get()), 0u) << "capture must not execute the step";

  for (std::size_t i = 0; i < kReplays; ++i)
    ASSERT_EQ(cudaGraphLaunch(exec, graph_stream.get()), cudaSuccess);
  for (std::size_t i = 0; i < kReplays; ++i)
    train_step(eager, config, kMaxNorm, eager_stream.get());
  graph_stream.synchronize();
  eager_stream.synchronize();

  EXPECT_EQ(graphed.read_step(graph_stream.get()), kReplays);
  EXPECT_EQ(eager.read_step(eager_stream.get()), kReplays);
  for (const nn::SlabPart part :
       {nn::SlabPart::Params, nn::SlabPart::Grads, nn::SlabPart::AdamM, nn::SlabPart::AdamV})
    expect_same_bits(graphed.download(part, graph_stream.get()),
                     eager.download(part, eager_stream.get()),
                     part == nn::SlabPart::Params  ? "params"
                     : part == nn::SlabPart::Grads ? "grads"
                     : part == nn::SlabPart::AdamM ? "m"
                                                   : "v");
  ScalarReadback<float> g_norm, e_norm, g_scale;
  g_norm.enqueue(graphed.grad_norm(), graph_stream.get());
  e_norm.enqueue(eager.grad_norm(), eager_stream.get());
  g_scale.enqueue(graphed.clip_scale(), graph_stream.get());
  const float graph_norm = g_norm.wait(), eager_norm = e_norm.wait();
  EXPECT_EQ(std::memcmp(&graph_norm, &eager_norm, sizeof(float)), 0)
      << "norm: graph " << graph_norm << ", eager " << eager_norm;
  EXPECT_GT(graph_norm, kMaxNorm) << "the test means clipping to be active";
  EXPECT_EQ(g_scale.wait(), 1.0f) << "adamw_step resets the clip scale";
  EXPECT_NE(graphed.download(nn::SlabPart::Params, graph_stream.get()), p0) << "nothing moved";
  std::printf("  %zu graph replays == %zu eager steps, bit for bit (last norm %.7g)\n", kReplays,
              kReplays, static_cast<double>(graph_norm));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

}  // namespace
