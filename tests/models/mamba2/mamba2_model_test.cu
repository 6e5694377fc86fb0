// The GPU Mamba2 model (lib/models/mamba2/mamba2_model.h) against the double reference
// (tests/reference/mamba2_reference.h), on a GPU (each test calls RESIDENT_REQUIRE_GPU first):
//   - every parameter tensor's gradient and the predictions and MSE loss, at a tiny config with
//     random parameters (every path matters), at an edge config (batch 1; batch 37, not a
//     multiple of 32, several chunks with a partial last one), and at the model's own init; the
//     prediction buffer poisoned with NaN, the gradients starting from random values (the
//     backward must add exactly its share);
//   - L = 128: chunk 64 against chunk 128 (one chunk), forward and gradients;
//   - a CUDA graph of forward + MSE + backward + clip_and_adamw_step replayed 3 times equals the
//     eager steps bit for bit (memcmp of the parameters);
//   - one train step at the benchmark shape (batch 256, L 64, F 32, D 64, 2 layers) with a finite
//     loss, and its graph-replayed time printed.
// Tolerances: |gpu - ref| <= atol + rtol |ref| with rtol 2e-3, atol 2e-4 (fp32 without TF32
// against double; observed errors on the host emulation of the same code are ~1e-6).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "lib/core/stream.h"
#include "lib/models/mamba2/mamba2_model.h"
#include "lib/models/model_registry.h"
#include "tests/models/mamba2/mamba2_test_support.h"
#include "tests/models/support/graph_step.h"
#include "tests/models/support/harness_values.h"
#include "tests/models/support/mse_step.h"
#include "tests/models/support/reference_params.h"
#include "tests/reference/mamba2_reference.h"
#include "tests/support/gpu.h"
#include "tests/support/slab_values.h"

namespace {

namespace ref = resident::reference;
namespace tm = resident::test::mamba2;
namespace th = resident::test;
using resident::StreamContext;
using resident::models::Mamba2Config;
using resident::models::Mamba2Model;
using resident::models::ModelShape;
using resident::nn::SlabPart;

constexpr double kRtol = 2e-3;
constexpr double kAtol = 2e-4;
constexpr int kPrintWidth = 40;  // the agreement lines' name column (tm::print_agreement's)

using th::MseStepResult;
using th::to_float;

ref::Mamba2Dims reference_dims(const Mamba2Config& c, const ModelShape& s) {
  ref::Mamba2Dims d;
  d.window = s.window;
  d.features = s.features;
  d.outputs = s.outputs;
  d.d_model = c.d_model;
  d.n_layers = c.n_layers;
  d.expand = c.expand;
  d.headdim = c.headdim;
  d.d_state = c.d_state;
  d.d_conv = c.d_conv;
  d.chunk = c.chunk;
  return d;
}

// Uploads `params` into the model's slab (each tensor by name).
void upload_params(Mamba2Model& model, ref::Mamba2Params params, const StreamContext& ctx) {
  for (auto& [name, tensor] : ref::mamba2_named_tensors(params))
    model.slab().upload(SlabPart::Params, name, to_float(*tensor), ctx.stream());
}

// The model's parameters as the reference's (float -> double).
ref::Mamba2Params download_params(Mamba2Model& model, const ref::Mamba2Dims& dims,
                                  const StreamContext& ctx) {
  return th::read_reference_params(
      model.slab(), ctx.stream(), ref::mamba2_zero_params(dims),
      [](ref::Mamba2Params& p) { return ref::mamba2_named_tensors(p); });
}

// Compares one GPU step with the reference; returns the prediction for further checks.
MseStepResult check_against_reference(const Mamba2Config& config, const ModelShape& shape,
                                   std::size_t batch, bool random_parameters, std::uint64_t seed) {
  StreamContext ctx;
  Mamba2Model model(config, shape, seed);
  const ref::Mamba2Dims dims = reference_dims(config, shape);
  std::mt19937_64 rng(seed);
  if (random_parameters) upload_params(model, tm::random_params(dims, rng), ctx);
  const ref::Mamba2Params params = download_params(model, dims, ctx);
  const std::vector<double> x = tm::random_values(batch * shape.window * shape.features, -1, 1, rng);
  const std::vector<double> target = tm::random_values(batch * shape.outputs, -1, 1, rng);
  const std::vector<float> grads0 = th::random_slab_values(model.slab(), rng);
  const MseStepResult r = th::gpu_mse_step(model, ctx, to_float(x), to_float(target), batch,
                                           grads0);

  const std::vector<double> pred = ref::mamba2_forward(dims, params, x, batch);
  const th::MseReference mse = th::reference_mse(pred, target);
  ref::Mamba2Gradients g = ref::mamba2_backward(dims, params, x, batch, mse.dpred);

  std::printf("%s, batch %zu, L %zu, chunk %zu, D %zu, layers %zu, headdim %zu, d_state %zu, "
              "%s parameters:\n",
              model.describe().c_str(), batch, shape.window, config.chunk, config.d_model,
              config.n_layers, config.headdim, config.d_state, random_parameters ? "random" : "init");
  th::expect_mse_step_agrees(r, pred, mse.loss, kRtol, kAtol, kPrintWidth);
  for (auto& [name, tensor] : ref::mamba2_named_tensors(g.params))
    th::expect_gradient_agrees(name, r.grads_added, model.slab(), *tensor, kRtol, kAtol,
                               kPrintWidth);
  return r;
}

Mamba2Config tiny_config(std::size_t chunk) {
  Mamba2Config c;
  c.d_model = 8;
  c.n_layers = 2;
  c.expand = 2;
  c.headdim = 4;
  c.d_state = 3;
  c.d_conv = 4;
  c.chunk = chunk;
  return c;
}

TEST(Mamba2Model, GradientsMatchReferenceTiny) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(tiny_config(64), ModelShape{5, 3, 2, 4}, 2, true, 71);
  check_against_reference(tiny_config(2), ModelShape{5, 3, 2, 4}, 2, true, 72);
}

TEST(Mamba2Model, GradientsMatchReferenceEdges) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(tiny_config(64), ModelShape{5, 3, 1, 4}, 1, true, 73);  // batch 1
  Mamba2Config c;
  c.d_model = 16;
  c.n_layers = 2;
  c.headdim = 8;
  c.d_state = 5;
  c.d_conv = 3;
  c.chunk = 4;
  check_against_reference(c, ModelShape{11, 6, 3, 40}, 37, true, 74);  // 3 chunks, last partial
}

TEST(Mamba2Model, GradientsMatchReferenceAtInit) {
  RESIDENT_REQUIRE_GPU();
  Mamba2Config c;  // the small config's widths at a short window
  check_against_reference(c, ModelShape{16, 8, 1, 33}, 33, false, 75);
}

TEST(Mamba2Model, ChunkedMatchesOneChunkAtWindow128) {
  RESIDENT_REQUIRE_GPU();
  // chunk 128 with headdim 32 and d_state 32 needs more shared memory than a block has; this
  // config fits one 128-step chunk.
  Mamba2Config c;
  c.d_model = 32;
  c.n_layers = 2;
  c.headdim = 16;
  c.d_state = 16;
  const ModelShape shape{128, 8, 1, 8};
  c.chunk = 64;
  const MseStepResult chunked = check_against_reference(c, shape, 5, true, 76);
  c.chunk = 128;
  const MseStepResult single = check_against_reference(c, shape, 5, true, 76);
  // Same parameters, inputs and starting grads (same seed): the two differ by fp32 rounding.
  const double rtol = 1e-4, atol = 1e-5;
  const tm::Agreement pa = tm::agreement(chunked.prediction, single.prediction, rtol, atol);
  tm::print_agreement("chunk 64 vs 128: prediction", pa, rtol, atol);
  EXPECT_LE(pa.share, 1.0);
  const tm::Agreement ga = tm::agreement(chunked.grads_added, single.grads_added, rtol, atol);
  tm::print_agreement("chunk 64 vs 128: every gradient", ga, rtol, atol);
  EXPECT_LE(ga.share, 1.0) << "slab element " << ga.worst;
}

TEST(Mamba2Model, GraphReplayEqualsEagerBitForBit) {
  RESIDENT_REQUIRE_GPU();
  const th::ReplayComparison r = th::expect_mse_graph_replay_equals_eager<Mamba2Model>(
      96, Mamba2Config{}, ModelShape{64, 32, 1, 96}, 81);
  ASSERT_NE(r.compared, 0u);
  std::printf("3 eager steps and 3 graph replays: %zu parameters equal bit for bit\n",
              r.compared);
}

TEST(Mamba2Model, BenchmarkShapeTrainStep) {
  RESIDENT_REQUIRE_GPU();
  const ModelShape shape{64, 32, 1, 256};
  const std::size_t batch = 256;
  const auto made = resident::models::make_supervised_model("mamba2", shape, 91);
  auto* model = dynamic_cast<Mamba2Model*>(made.get());
  ASSERT_NE(model, nullptr);
  std::printf("%s\n", model->describe().c_str());
  // Graph-replayed step time (for information; the lead's benchmark is the record).
  const int reps = 100;
  const float ms = th::expect_mse_benchmark_step(*model, batch, 92, reps);
  std::printf("graph-replayed train step: %.4f ms (mean of %d; target <= 0.6 ms)\n", ms, reps);
}

}  // namespace
