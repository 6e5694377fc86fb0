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
//
// Clip folded into AdamW (clip_and_adamw_step / launch_clip_adamw, two kernels): bit for bit the
// params, m, v, step and norm of the separate norm + AdamW calls, over several steps on the same
// inputs, with clipping active and inactive, at sizes 1, 5, 4099 and 2^21 + 3 (odd tails; the
// last one strides the grid and has more partials than threads per block), with weight decay,
// nonzero starting m, v and step, and the LinearToZero schedule crossing group boundaries.
//
// Learning-rate schedule (LinearToZero, evaluated on the device from the step counter): 8 steps
// across groups down to lr 0 against the reference adamw_step called with the scheduled lr per
// step (same tolerance as above); a captured graph follows the schedule without re-capture (its
// replays equal eager steps given a Constant config at the host mirror's lr, bit for bit); the
// host mirror scheduled_lr against the formula, and invalid schedule fields named with value and
// range (these two run without a GPU).
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

#include "kernels/core/error.h"
#include "kernels/nn/adamw.h"
#include "kernels/nn/global_norm.h"
#include "lib/core/device_buffer.h"
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

std::vector<float> random_floats(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = value(rng);
  return v;
}

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
  EXPECT_THROW(slab.clip_and_adamw_step(1.0f, {}, stream.get()), Error);
  slab.finalize();
  for (const nn::AdamWConfig bad :
       {nn::AdamWConfig{.lr = -1.0}, nn::AdamWConfig{.lr = std::nan("")},
        nn::AdamWConfig{.beta1 = 1.0}, nn::AdamWConfig{.beta2 = -0.1}, nn::AdamWConfig{.eps = 0.0},
        nn::AdamWConfig{.weight_decay = -0.5}, nn::AdamWConfig{.steps_per_group = 0},
        nn::AdamWConfig{.total_groups = 0},
        nn::AdamWConfig{.schedule = static_cast<nn::LrSchedule>(7)}}) {
    EXPECT_THROW(slab.adamw_step(bad, stream.get()), Error);
    EXPECT_THROW(slab.clip_and_adamw_step(1.0f, bad, stream.get()), Error);
  }
  for (const float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN()})
    EXPECT_THROW(slab.clip_and_adamw_step(bad, {}, stream.get()), Error);
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
                cudaStream_t stream, bool fused = false) {
  slab.zero_grads(stream);
  std::uint32_t salt = 0;
  for (const nn::SlabTensor& t : slab.layout().tensors()) {
    fill_grads_from_step<<<static_cast<unsigned>((t.size + 255) / 256), 256, 0, stream>>>(
        slab.grad(t.name), t.size, salt++, slab.step_counter());
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  }
  if (fused) {
    slab.clip_and_adamw_step(max_norm, config, stream);
    return;
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

// Two slabs of the same tensors and initial params, each on its own stream: `graphed` driven by
// replays of one captured train_step, `eager` by direct calls.
struct GraphedAndEager {
  nn::ParamSlab graphed, eager;
  Stream graph_stream, eager_stream;
  std::vector<float> p0;  // the initial params of both
  explicit GraphedAndEager(std::uint64_t seed) {
    declare_tensors(graphed);
    declare_tensors(eager);
    graphed.finalize();
    eager.finalize();
    std::mt19937_64 rng(seed);
    p0 = random_slab(graphed.layout(), rng);
    graphed.upload(nn::SlabPart::Params, p0, graph_stream.get());
    eager.upload(nn::SlabPart::Params, p0, eager_stream.get());
  }
  // Captures one train_step of `graphed` (host interaction would fail the capture), checks that
  // the capture itself did not step, and replays it `replays` times.
  void capture_and_replay(const nn::AdamWConfig& config, float max_norm, bool fused,
                          std::size_t replays) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(graph_stream.get(), cudaStreamCaptureModeGlobal),
              cudaSuccess);
    train_step(graphed, config, max_norm, graph_stream.get(), fused);
    ASSERT_EQ(cudaStreamEndCapture(graph_stream.get(), &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    EXPECT_EQ(graphed.read_step(graph_stream.get()), 0u) << "capture must not execute the step";
    for (std::size_t i = 0; i < replays; ++i)
      ASSERT_EQ(cudaGraphLaunch(exec, graph_stream.get()), cudaSuccess);
    graph_stream.synchronize();
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
};

TEST(AdamW, GraphReplaysEqualEagerStepsBitForBit) {
  RESIDENT_REQUIRE_GPU();
  constexpr std::size_t kReplays = 7;
  constexpr float kMaxNorm = 20.0f;  // the grads' norm is ~160: clipping is active
  const nn::AdamWConfig config{.lr = 3e-3, .weight_decay = 0.05};
  GraphedAndEager slabs(0x6A4F);
  slabs.capture_and_replay(config, kMaxNorm, /*fused=*/false, kReplays);
  nn::ParamSlab &graphed = slabs.graphed, &eager = slabs.eager;
  const Stream &graph_stream = slabs.graph_stream, &eager_stream = slabs.eager_stream;

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
  EXPECT_NE(graphed.download(nn::SlabPart::Params, graph_stream.get()), slabs.p0)
      << "nothing moved";
  std::printf("  %zu graph replays == %zu eager steps, bit for bit (last norm %.7g)\n", kReplays,
              kReplays, static_cast<double>(graph_norm));
}

// ---------------------------------------------------------------------------------------------
// Clip folded into AdamW (launch_clip_adamw, ParamSlab::clip_and_adamw_step): bit for bit the
// separate launch_global_norm + launch_adamw on the same inputs.

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}


enum class ClipRegime { Clips, Roomy, Never };

struct FusedCase {
  const char* name;
  std::size_t n;
  ClipRegime clip;  // Clips: max_norm = half the smallest step norm; Roomy: twice the largest
  nn::LrSchedule schedule;
};

// One optimizer's device state over n elements.
struct KernelState {
  DeviceBuffer<float> params, m, v, norm_and_scale{2};
  DeviceBuffer<std::uint64_t> step{1};
  DeviceBuffer<double> partials;
  DeviceBuffer<unsigned int> done{1};

  KernelState(std::size_t n, const std::vector<float>& p0, const std::vector<float>& m0,
              const std::vector<float>& v0, std::uint64_t step0)
      : params(n), m(n), v(n), partials(kernels::global_norm_partial_count(n)) {
    params.upload(p0);
    m.upload(m0);
    v.upload(v0);
    norm_and_scale.upload(std::vector<float>{std::numeric_limits<float>::quiet_NaN(), 1.0f});
    step.upload(std::vector<std::uint64_t>{step0});
    partials.upload(std::vector<double>(partials.size(), std::numeric_limits<double>::quiet_NaN()));
    done.upload(std::vector<unsigned int>{0});
  }
};

class FusedClipAdamW : public ::testing::TestWithParam<FusedCase> {};

TEST_P(FusedClipAdamW, EqualsTheSeparateNormAndAdamWBitForBit) {
  RESIDENT_REQUIRE_GPU();
  const FusedCase c = GetParam();
  constexpr std::size_t kFusedSteps = 4;
  constexpr std::uint64_t kStep0 = 3;  // t = 4..7: LinearToZero groups 1, 2, 2, 3 (lr 2/3, 1/3, 1/3, 0)
  std::mt19937_64 rng(0xF05ED + c.n);
  const std::vector<float> p0 = random_floats(c.n, rng);
  std::vector<float> m0 = random_floats(c.n, rng), v0 = random_floats(c.n, rng);
  for (float& x : m0) x *= 0.1f;
  for (float& x : v0) x = 0.01f * x * x;  // v >= 0
  std::vector<std::uint8_t> mask(c.n);
  for (auto& k : mask) k = static_cast<std::uint8_t>(rng() % 2);
  std::vector<std::vector<float>> grads(kFusedSteps);
  double smallest = std::numeric_limits<double>::infinity(), largest = 0;
  for (auto& g : grads) {
    g = random_floats(c.n, rng);
    const double norm = ref::global_norm(to_double(g));
    smallest = std::min(smallest, norm);
    largest = std::max(largest, norm);
  }
  const float max_norm = c.clip == ClipRegime::Clips   ? static_cast<float>(smallest / 2)
                         : c.clip == ClipRegime::Roomy ? static_cast<float>(largest * 2)
                                                       : std::numeric_limits<float>::infinity();
  const nn::AdamWConfig config{.lr = 1e-2,
                               .weight_decay = 0.1,
                               .schedule = c.schedule,
                               .steps_per_group = 2,
                               .total_groups = 3};
  const kernels::AdamWConstants constants = nn::adamw_constants(config, "FusedClipAdamW");

  KernelState separate(c.n, p0, m0, v0, kStep0), fused(c.n, p0, m0, v0, kStep0);
  DeviceBuffer<float> d_grads(c.n);
  DeviceBuffer<std::uint8_t> d_mask(c.n);
  d_mask.upload(mask);
  const Stream stream;
  for (std::size_t k = 0; k < kFusedSteps; ++k) {
    d_grads.upload(grads[k]);
    kernels::launch_global_norm(separate.norm_and_scale.data(), separate.norm_and_scale.data() + 1,
                                separate.partials.data(), d_grads.data(), c.n, max_norm,
                                stream.get());
    kernels::launch_adamw(separate.params.data(), separate.m.data(), separate.v.data(),
                          separate.step.data(), separate.norm_and_scale.data() + 1,
                          separate.done.data(), d_grads.data(), d_mask.data(), c.n, constants,
                          stream.get());
    kernels::launch_clip_adamw(fused.params.data(), fused.m.data(), fused.v.data(),
                               fused.step.data(), fused.norm_and_scale.data(),
                               fused.norm_and_scale.data() + 1, fused.partials.data(),
                               fused.done.data(), d_grads.data(), d_mask.data(), c.n, max_norm,
                               constants, stream.get());
    stream.synchronize();
    const std::string at = std::string(c.name) + " step " + std::to_string(k + 1);
    EXPECT_TRUE(same_bits(fused.params.download(), separate.params.download())) << at << ": params";
    EXPECT_TRUE(same_bits(fused.m.download(), separate.m.download())) << at << ": m";
    EXPECT_TRUE(same_bits(fused.v.download(), separate.v.download())) << at << ": v";
    const std::vector<float> ns_fused = fused.norm_and_scale.download(),
                             ns_separate = separate.norm_and_scale.download();
    EXPECT_TRUE(same_bits(ns_fused, ns_separate))
        << at << ": norm " << ns_fused[0] << " vs " << ns_separate[0] << ", scale " << ns_fused[1]
        << " vs " << ns_separate[1];
    EXPECT_EQ(ns_fused[1], 1.0f) << at << ": the scale is reset to 1";
    const double ref_norm = ref::global_norm(to_double(grads[k]));
    EXPECT_LE(std::fabs(ns_fused[0] - ref_norm), kNormTolerance * ref_norm) << at << ": norm";
    if (c.clip == ClipRegime::Clips) EXPECT_GT(ref_norm, max_norm) << at << ": meant to clip";
    if (c.clip != ClipRegime::Clips) EXPECT_LE(ref_norm, max_norm) << at << ": meant not to clip";
    EXPECT_EQ(fused.step.download()[0], kStep0 + k + 1) << at;
    EXPECT_EQ(separate.step.download()[0], kStep0 + k + 1) << at;
    EXPECT_EQ(fused.done.download()[0], 0u) << at << ": the ticket counter is left at 0";
    EXPECT_EQ(separate.done.download()[0], 0u) << at << ": the ticket counter is left at 0";
  }
  const std::vector<float> p_end = fused.params.download();
  std::size_t moved = 0;
  for (std::size_t i = 0; i < c.n; ++i) moved += p_end[i] != p0[i];
  // An update far below a parameter's ulp rounds back to it (15 of 2^21 on the H200), so the
  // guard against a step that did nothing asks for 99.9%, not every element.
  EXPECT_GE(static_cast<double>(moved), 0.999 * static_cast<double>(c.n))
      << "parameters move (" << moved << " of " << c.n << ")";
  std::printf("  %-12s n %8zu, %zu steps, max_norm %-10g (norms %.6g..%.6g): fused == separate, "
              "bit for bit\n",
              c.name, c.n, kFusedSteps, static_cast<double>(max_norm), smallest, largest);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FusedClipAdamW,
    ::testing::Values(
        FusedCase{"n1_clips", 1, ClipRegime::Clips, nn::LrSchedule::Constant},
        FusedCase{"n5_roomy", 5, ClipRegime::Roomy, nn::LrSchedule::LinearToZero},
        FusedCase{"n4099_clips", 4099, ClipRegime::Clips, nn::LrSchedule::LinearToZero},
        FusedCase{"n4099_roomy", 4099, ClipRegime::Roomy, nn::LrSchedule::Constant},
        FusedCase{"n2M_clips", (std::size_t{1} << 21) + 3, ClipRegime::Clips,
                  nn::LrSchedule::LinearToZero},
        FusedCase{"n2M_never", (std::size_t{1} << 21) + 3, ClipRegime::Never,
                  nn::LrSchedule::Constant}),
    [](const auto& info) { return std::string(info.param.name); });

// The slab's call against the slab's two calls (tensors with padding between them).
TEST(ParamSlabClipAndAdamW, EqualsGlobalNormThenAdamWBitForBit) {
  RESIDENT_REQUIRE_GPU();
  const nn::AdamWConfig config{.lr = 1e-2, .weight_decay = 0.1};
  nn::ParamSlab separate, fused;
  declare_tensors(separate);
  declare_tensors(fused);
  separate.finalize();
  fused.finalize();
  const Stream stream;
  std::mt19937_64 rng(0x5AB);
  const std::vector<float> p0 = random_slab(separate.layout(), rng);
  separate.upload(nn::SlabPart::Params, p0, stream.get());
  fused.upload(nn::SlabPart::Params, p0, stream.get());
  ScalarReadback<float> norm_separate, norm_fused, scale_fused;
  for (const float max_norm : {20.0f, 1e6f, 20.0f}) {  // norm ~ 160: clips, does not, clips
    const std::vector<float> g = random_slab(separate.layout(), rng);
    separate.upload(nn::SlabPart::Grads, g, stream.get());
    fused.upload(nn::SlabPart::Grads, g, stream.get());
    separate.global_grad_norm_and_clip(max_norm, stream.get());
    separate.adamw_step(config, stream.get());
    fused.clip_and_adamw_step(max_norm, config, stream.get());
    for (const nn::SlabPart part : {nn::SlabPart::Params, nn::SlabPart::AdamM, nn::SlabPart::AdamV})
      EXPECT_TRUE(same_bits(fused.download(part, stream.get()),
                            separate.download(part, stream.get())))
          << "part " << static_cast<int>(part) << ", max_norm " << max_norm;
    norm_separate.enqueue(separate.grad_norm(), stream.get());
    norm_fused.enqueue(fused.grad_norm(), stream.get());
    scale_fused.enqueue(fused.clip_scale(), stream.get());
    const float a = norm_separate.wait(), b = norm_fused.wait();
    EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "norm: separate " << a << ", fused " << b;
    EXPECT_EQ(scale_fused.wait(), 1.0f);
    EXPECT_EQ(fused.read_step(stream.get()), separate.read_step(stream.get()));
  }
  EXPECT_EQ(fused.read_step(stream.get()), 3u);
  std::printf("  slab: 3 clip_and_adamw_step == 3 x (global_grad_norm_and_clip + adamw_step)\n");
}

// ---------------------------------------------------------------------------------------------
// Learning-rate schedule on the device.

TEST(AdamWSchedule, LinearToZeroMatchesTheReferenceAtTheScheduledLr) {
  RESIDENT_REQUIRE_GPU();
  // t = 1..8: groups 0, 0, 1, 1, 2, 2, 3, 3: lr, lr, 2/3 lr, 2/3 lr, 1/3 lr, 1/3 lr, 0, 0.
  constexpr std::size_t kScheduleSteps = 8;
  constexpr float kMaxNorm = 20.0f;  // the grads' norm is ~160: clipping is active
  const nn::AdamWConfig config{.lr = 1e-2,
                               .weight_decay = 0.1,
                               .schedule = nn::LrSchedule::LinearToZero,
                               .steps_per_group = 2,
                               .total_groups = 3};
  nn::ParamSlab slab;
  declare_tensors(slab);
  slab.finalize();
  const nn::SlabLayout& layout = slab.layout();
  const Stream stream;
  std::mt19937_64 rng(0x5C4ED);
  const std::vector<std::uint8_t> mask = layout.decay_mask();
  const std::vector<float> p0 = random_slab(layout, rng);
  slab.upload(nn::SlabPart::Params, p0, stream.get());
  std::vector<double> p = to_double(p0), m(p.size(), 0.0), v(p.size(), 0.0);
  double worst_p = 0, worst_m = 0, worst_v = 0;
  std::vector<float> previous = p0;
  for (std::size_t step = 1; step <= kScheduleSteps; ++step) {
    const std::vector<float> g = random_slab(layout, rng);
    slab.upload(nn::SlabPart::Grads, g, stream.get());
    slab.clip_and_adamw_step(kMaxNorm, config, stream.get());
    std::vector<double> g_ref = to_double(g);
    ref::clip_global_norm(g_ref, static_cast<double>(kMaxNorm));
    const double lr = nn::scheduled_lr(config, step);
    ref::adamw_step({.lr = lr,
                     .beta1 = config.beta1,
                     .beta2 = config.beta2,
                     .eps = config.eps,
                     .weight_decay = config.weight_decay},
                    step, p, g_ref, m, v, mask);
    const std::vector<float> got = slab.download(nn::SlabPart::Params, stream.get());
    worst_p = std::max(worst_p, expect_close(got, p, kAtolParams, "params", step));
    worst_m = std::max(worst_m, expect_close(slab.download(nn::SlabPart::AdamM, stream.get()), m,
                                             kAtolM, "m", step));
    worst_v = std::max(worst_v, expect_close(slab.download(nn::SlabPart::AdamV, stream.get()), v,
                                             kAtolV, "v", step));
    if (lr == 0.0)
      EXPECT_TRUE(same_bits(got, previous)) << "lr 0 at step " << step << " moved the params";
    else
      EXPECT_FALSE(same_bits(got, previous)) << "step " << step << " did not move the params";
    previous = got;
    std::printf("  step %zu: lr %.9g\n", step, lr);
  }
  EXPECT_EQ(slab.read_step(stream.get()), kScheduleSteps);
  EXPECT_EQ(nn::scheduled_lr(config, kScheduleSteps), 0.0) << "the schedule is meant to reach 0";
  std::printf("  LinearToZero over %zu steps: worst params %.0f%%, m %.0f%%, v %.0f%% of tolerance\n",
              kScheduleSteps, 100 * worst_p, 100 * worst_m, 100 * worst_v);
}

TEST(AdamWSchedule, AGraphFollowsTheScheduleWithoutRecapture) {
  RESIDENT_REQUIRE_GPU();
  constexpr std::size_t kReplays = 8;  // groups 0, 0, 0, 1, 1, 1, 2, 2: lr, lr/2, 0
  constexpr float kMaxNorm = 20.0f;
  const nn::AdamWConfig config{.lr = 3e-3,
                               .weight_decay = 0.05,
                               .schedule = nn::LrSchedule::LinearToZero,
                               .steps_per_group = 3,
                               .total_groups = 2};
  GraphedAndEager slabs(0x6A5C);
  slabs.capture_and_replay(config, kMaxNorm, /*fused=*/true, kReplays);
  nn::ParamSlab &graphed = slabs.graphed, &eager = slabs.eager;
  const Stream &graph_stream = slabs.graph_stream, &eager_stream = slabs.eager_stream;
  // Eager: a Constant config per step at the host mirror's lr for that step.
  for (std::size_t t = 1; t <= kReplays; ++t) {
    nn::AdamWConfig constant = config;
    constant.schedule = nn::LrSchedule::Constant;
    constant.lr = nn::scheduled_lr(config, t);
    train_step(eager, constant, kMaxNorm, eager_stream.get(), /*fused=*/true);
  }
  graph_stream.synchronize();
  eager_stream.synchronize();
  EXPECT_EQ(graphed.read_step(graph_stream.get()), kReplays);
  for (const nn::SlabPart part : {nn::SlabPart::Params, nn::SlabPart::AdamM, nn::SlabPart::AdamV})
    expect_same_bits(graphed.download(part, graph_stream.get()),
                     eager.download(part, eager_stream.get()),
                     part == nn::SlabPart::Params ? "params" : part == nn::SlabPart::AdamM ? "m" : "v");
  std::printf("  %zu replays of one captured LinearToZero step == %zu eager steps at the mirrored "
              "lr, bit for bit\n",
              kReplays, kReplays);
}

// Host only (no GPU needed).
TEST(AdamWSchedule, HostMirrorFollowsTheFormula) {
  const nn::AdamWConfig constant{.lr = 2.5e-4};
  for (const std::uint64_t t : {std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{1000},
                                std::uint64_t{1} << 40})
    EXPECT_EQ(nn::scheduled_lr(constant, t), 2.5e-4) << "t " << t;
  const nn::AdamWConfig linear{.lr = 2.5e-4,
                               .schedule = nn::LrSchedule::LinearToZero,
                               .steps_per_group = 16,
                               .total_groups = 5};
  for (std::uint64_t t = 1; t <= 120; ++t) {
    const double group = std::floor(static_cast<double>(t - 1) / 16.0);
    const double want = 2.5e-4 * std::max(0.0, 1.0 - group / 5.0);
    EXPECT_EQ(nn::scheduled_lr(linear, t), want) << "t " << t;
  }
  EXPECT_EQ(nn::scheduled_lr(linear, 16), 2.5e-4);  // the last step of group 0
  EXPECT_EQ(nn::scheduled_lr(linear, 17), 2.5e-4 * (1.0 - 1.0 / 5.0));
  EXPECT_GT(nn::scheduled_lr(linear, 80), 0.0);  // group 4 of 5
  EXPECT_EQ(nn::scheduled_lr(linear, 81), 0.0);  // group 5: 0 from here on
  EXPECT_EQ(nn::scheduled_lr(linear, std::uint64_t{1} << 50), 0.0);
  std::printf("  LinearToZero (16 steps/group, 5 groups): t 1 -> %g, 17 -> %g, 80 -> %g, 81 -> %g\n",
              nn::scheduled_lr(linear, 1), nn::scheduled_lr(linear, 17),
              nn::scheduled_lr(linear, 80), nn::scheduled_lr(linear, 81));
}

TEST(AdamWSchedule, InvalidFieldsNameTheFieldValueAndRange) {
  const auto message = [](const nn::AdamWConfig& config, std::uint64_t t) -> std::string {
    try {
      (void)nn::scheduled_lr(config, t);
    } catch (const Error& e) {
      return e.what();
    }
    return "(accepted)";
  };
  const std::tuple<nn::AdamWConfig, const char*, const char*> cases[] = {
      {nn::AdamWConfig{.steps_per_group = 0}, "steps_per_group = 0", "must be >= 1"},
      {nn::AdamWConfig{.total_groups = 0}, "total_groups = 0", "must be >= 1"},
      {nn::AdamWConfig{.schedule = static_cast<nn::LrSchedule>(7)}, "schedule = 7",
       "must be Constant (0) or LinearToZero (1)"},
      {nn::AdamWConfig{.lr = -1.0}, "lr = -1", "must be finite and >= 0"},
  };
  for (const auto& [config, field, range] : cases) {
    const std::string what = message(config, 1);
    EXPECT_NE(what.find(field), std::string::npos) << what;
    EXPECT_NE(what.find(range), std::string::npos) << what;
  }
  EXPECT_NE(message({}, 0).find("t = 0"), std::string::npos) << "t is 1-based";
  EXPECT_EQ(message({.schedule = nn::LrSchedule::LinearToZero}, 1), "(accepted)");
}

}  // namespace
