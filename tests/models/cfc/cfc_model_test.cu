// The GPU Liquid CfC model (lib/models/cfc/cfc_model.h) against the double reference
// (tests/reference/cfc_reference.h), on a GPU (each test calls RESIDENT_REQUIRE_GPU first):
//   - the prediction, the MSE loss and every parameter tensor's gradient, for the default and the
//     pure cell, at tiny configs with random parameters (every path matters), at edges (batch 1,
//     L 1; batch 37, not a multiple of the block's rows; steps per launch 1 and 3 of 7), at the
//     full small config (H 64, U 128; batches 9 and 5, a partial last block; cfc_test_cases.h
//     bounds its random weights by fan-in so the recurrence is well conditioned), with uneven
//     elapsed times from an input column, and at the model's own init; the prediction
//     poisoned with NaN, the gradients starting from random values (the backward must add
//     exactly its share);
//   - steps per launch 1 against the whole window: the same bits;
//   - a CUDA graph of zero_grads + forward + MSE + backward + clip_and_adamw_step replayed 3
//     times equals 3 eager steps bit for bit (memcmp of the parameters), for both cells;
//   - one train step at the benchmark shape (batch 256, L 64, F 32, H 64, U 128) with a finite
//     loss, and its graph-replayed time printed (target <= 4 ms).
// Tolerances: |gpu - ref| <= atol + rtol |ref| with rtol 2e-3, atol 2e-4 (fp32 without TF32
// against double, over recurrences of up to 16 steps).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lib/core/stream.h"
#include "lib/models/cfc/cfc_model.h"
#include "lib/models/model_registry.h"
#include "tests/models/cfc/cfc_test_cases.h"
#include "tests/models/support/agreement.h"
#include "tests/models/support/graph_step.h"
#include "tests/models/support/harness_values.h"
#include "tests/models/support/mse_step.h"
#include "tests/models/support/reference_params.h"
#include "tests/reference/cfc_reference.h"
#include "tests/support/gpu.h"
#include "tests/support/slab_values.h"

namespace {

namespace ref = resident::reference;
namespace th = resident::test;
using resident::StreamContext;
using resident::models::CfcConfig;
using resident::models::CfcMode;
using resident::models::CfcModel;
using resident::models::ModelShape;
using resident::nn::SlabPart;

constexpr double kRtol = resident::test::kCfcTestRtol;
constexpr double kAtol = resident::test::kCfcTestAtol;
constexpr int kPrintWidth = 28;  // the agreement lines' name column

using th::MseStepResult;
using th::to_float;

// Random parameters (tests/models/cfc/cfc_test_cases.h) uploaded; the reference reads them back
// (the float values the GPU uses).
void set_random_params(CfcModel& model, const ref::CfcDims& dims, std::mt19937_64& rng,
                       const StreamContext& ctx) {
  ref::CfcParams p = resident::test::cfc_random_params(dims, rng);
  for (auto& [name, tensor] : ref::cfc_named_tensors(p))
    model.slab().upload(SlabPart::Params, name, to_float(*tensor), ctx.stream());
}

ref::CfcParams download_params(CfcModel& model, const ref::CfcDims& dims,
                               const StreamContext& ctx) {
  return th::read_reference_params(model.slab(), ctx.stream(), ref::cfc_zero_params(dims),
                                   [](ref::CfcParams& p) { return ref::cfc_named_tensors(p); });
}

// One GPU step against the reference; the draws are cfc_test_cases.h's (x's time column, when
// named, holds uneven ts in [0.1, 2.5]).
MseStepResult check_against_reference(const CfcConfig& config, const ModelShape& shape,
                                   std::size_t batch, bool random_parameters, std::uint64_t seed) {
  StreamContext ctx;
  CfcModel model(shape, config, seed);
  const ref::CfcDims dims = resident::test::cfc_reference_dims(config, shape);
  std::mt19937_64 rng(seed);
  if (random_parameters) set_random_params(model, dims, rng, ctx);
  const ref::CfcParams params = download_params(model, dims, ctx);
  const std::vector<double> x = resident::test::cfc_random_inputs(dims, batch, rng);
  const std::vector<float> xf = to_float(x);
  const std::vector<double> target = th::cfc_uniform(batch * shape.outputs, -1, 1, rng);
  const std::vector<float> grads0 = th::random_slab_values(model.slab(), rng);
  const MseStepResult r = th::gpu_mse_step(model, ctx, xf, to_float(target), batch, grads0);

  const std::vector<double> pred = ref::cfc_forward(dims, params, x, batch);
  const th::MseReference mse = th::reference_mse(pred, target);
  ref::CfcGradients g = ref::cfc_backward(dims, params, x, batch, mse.dpred);

  std::printf("%s, batch %zu, L %zu, F %zu, outputs %zu, %s parameters:\n",
              model.describe().c_str(), batch, shape.window, shape.features, shape.outputs,
              random_parameters ? "random" : "init");
  th::expect_mse_step_agrees(r, pred, mse.loss, kRtol, kAtol, kPrintWidth);
  for (auto& [name, tensor] : ref::cfc_named_tensors(g.params))
    th::expect_gradient_agrees(name, r.grads_added, model.slab(), *tensor, kRtol, kAtol,
                               kPrintWidth);
  return r;
}

CfcConfig tiny(CfcMode mode, long time_column = -1, std::size_t steps_per_launch = 0) {
  CfcConfig c;
  c.hidden = 5;
  c.units = 7;
  c.mode = mode;
  c.time_column = time_column;
  c.steps_per_launch = steps_per_launch;
  return c;
}

TEST(CfcModel, GradientsMatchReferenceDefaultCell) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(tiny(CfcMode::Default), ModelShape{6, 3, 2, 4}, 3, true, 71);
}

TEST(CfcModel, GradientsMatchReferencePureCell) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(tiny(CfcMode::Pure), ModelShape{6, 3, 2, 4}, 3, true, 72);
}

TEST(CfcModel, GradientsMatchReferenceUnevenElapsedTime) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(tiny(CfcMode::Default, 1), ModelShape{7, 4, 2, 8}, 5, true, 73);
  check_against_reference(tiny(CfcMode::Pure, 0), ModelShape{7, 4, 1, 8}, 5, true, 74);
}

TEST(CfcModel, GradientsMatchReferenceEdges) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(tiny(CfcMode::Default), ModelShape{1, 2, 1, 1}, 1, true, 75);
  check_against_reference(tiny(CfcMode::Default, 2, 3), ModelShape{7, 5, 3, 40}, 37, true, 76);
  check_against_reference(tiny(CfcMode::Pure, -1, 1), ModelShape{7, 5, 1, 40}, 37, true, 77);
}

TEST(CfcModel, GradientsMatchReferenceWide) {
  RESIDENT_REQUIRE_GPU();
  for (const resident::test::CfcWideCase& c : resident::test::cfc_wide_cases())
    check_against_reference(c.config, c.shape, c.batch, true, c.seed);
}

TEST(CfcModel, GradientsMatchReferenceAtInit) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(CfcConfig{}, ModelShape{16, 8, 1, 33}, 33, false, 79);
  CfcConfig pure;
  pure.mode = CfcMode::Pure;
  check_against_reference(pure, ModelShape{16, 8, 1, 33}, 33, false, 80);
}

TEST(CfcModel, StepsPerLaunchGiveTheSameBits) {
  RESIDENT_REQUIRE_GPU();
  for (const CfcMode mode : {CfcMode::Default, CfcMode::Pure}) {
    const MseStepResult all = check_against_reference(tiny(mode, 2, 0), ModelShape{9, 4, 2, 16},
                                                      11, true, 81);
    const MseStepResult one = check_against_reference(tiny(mode, 2, 1), ModelShape{9, 4, 2, 16},
                                                      11, true, 81);
    EXPECT_EQ(std::memcmp(all.prediction.data(), one.prediction.data(),
                          all.prediction.size() * sizeof(float)),
              0);
    EXPECT_EQ(std::memcmp(all.grads_added.data(), one.grads_added.data(),
                          all.grads_added.size() * sizeof(float)),
              0);
  }
}

void graph_equals_eager(const CfcConfig& config) {
  const th::ReplayComparison r =
      th::expect_mse_graph_replay_equals_eager<CfcModel>(96, ModelShape{64, 32, 1, 96}, config, 81);
  if (r.compared == 0) return;
  std::printf("%s: 3 eager steps and 3 graph replays, %zu parameters equal bit for bit\n",
              r.description.c_str(), r.compared);
}

TEST(CfcModel, GraphReplayEqualsEagerBitForBit) {
  RESIDENT_REQUIRE_GPU();
  graph_equals_eager(CfcConfig{});
  CfcConfig pure;
  pure.mode = CfcMode::Pure;
  pure.time_column = 3;
  pure.steps_per_launch = 16;
  graph_equals_eager(pure);
}

TEST(CfcModel, BenchmarkShapeTrainStep) {
  RESIDENT_REQUIRE_GPU();
  const ModelShape shape{64, 32, 1, 256};
  const std::size_t batch = 256;
  const auto made = resident::models::make_supervised_model("cfc", shape, 91);
  auto* model = dynamic_cast<CfcModel*>(made.get());
  ASSERT_NE(model, nullptr);
  std::printf("%s, %zu parameters\n", model->describe().c_str(),
              model->slab().total_elements());
  const int reps = 50;
  const float ms = th::expect_mse_benchmark_step(*model, batch, 92, reps);
  std::printf("graph-replayed train step: %.4f ms (mean of %d; target <= 4 ms)\n", ms, reps);
}

}  // namespace
