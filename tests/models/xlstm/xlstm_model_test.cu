// The GPU xLSTM model (lib/models/xlstm/xlstm_model.h) against the double reference
// (tests/reference/xlstm_reference.h), on a GPU (each test calls RESIDENT_REQUIRE_GPU first):
//   - the prediction, the MSE loss and every parameter tensor's gradient at tiny configs with
//     random parameters (sLSTM at block 1 of 2, at 0 of 3, mLSTM only; edges L 1 / batch 1 and
//     batch 37), at the model's own init (the small config, L 16), and with input-gate biases of
//     +80 (exp(80) is near float's limit: the stabilized cell must stay finite and exact); the
//     prediction poisoned with NaN, the gradients starting from random values (the backward must
//     add exactly its share);
//   - a CUDA graph of zero_grads + forward + MSE + backward + clip_and_adamw_step replayed 3
//     times equals 3 eager steps bit for bit (memcmp of the parameters);
//   - one train step at the benchmark shape (batch 256, L 64, F 32, the small config) with a
//     finite loss, and its graph-replayed time printed.
// Tolerances: |gpu - ref| <= atol + rtol |ref| with rtol 3e-3, atol 3e-4 (fp32 without TF32
// against double, through 2-4 blocks of LayerNorms and the recurrences).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lib/core/stream.h"
#include "lib/models/model_registry.h"
#include "lib/models/xlstm/xlstm_model.h"
#include "tests/models/support/agreement.h"
#include "tests/models/support/graph_step.h"
#include "tests/models/support/harness_values.h"
#include "tests/models/support/mse_step.h"
#include "tests/models/support/reference_params.h"
#include "tests/reference/xlstm_reference.h"
#include "tests/support/gpu.h"
#include "tests/support/slab_values.h"

namespace {

namespace ref = resident::reference;
namespace th = resident::test;
using resident::StreamContext;
using resident::models::ModelShape;
using resident::models::XlstmConfig;
using resident::models::XlstmModel;
using resident::nn::SlabPart;

constexpr double kRtol = 3e-3;
constexpr double kAtol = 3e-4;
constexpr int kPrintWidth = 28;  // the agreement lines' name column

using th::MseStepResult;
using th::random_values;
using th::to_float;

ref::XlstmDims reference_dims(const XlstmConfig& c, const ModelShape& s) {
  ref::XlstmDims d;
  d.window = s.window;
  d.features = s.features;
  d.outputs = s.outputs;
  d.d_model = c.d_model;
  d.heads = c.heads;
  d.inner = c.inner();
  d.ffn = c.ffn();
  d.blocks = c.blocks;
  d.slstm_at = c.slstm_at;
  d.conv_kernel = c.conv_kernel;
  d.cell_eps = c.cell_eps;
  return d;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Random parameters as the reference's FD test draws them (norm weights near 1, gate and
// recurrent weights U(-1, 1), the rest U(-0.5, 0.5)); input-gate biases + input_gate_shift.
void set_random_params(XlstmModel& model, const ref::XlstmDims& dims, std::mt19937_64& rng,
                       double input_gate_shift, const StreamContext& ctx) {
  ref::XlstmParams p = ref::xlstm_zero_params(dims);
  for (auto& [name, tensor] : p.tensors) {
    if (ends_with(name, "norm.weight"))
      tensor = random_values(tensor.size(), 0.6, 1.4, rng);
    else if (ends_with(name, "gate.weight") || ends_with(name, "r.weight"))
      tensor = random_values(tensor.size(), -1.0, 1.0, rng);
    else
      tensor = random_values(tensor.size(), -0.5, 0.5, rng);
    if (ends_with(name, "gate.bias"))
      for (std::size_t h = 0; h < dims.heads; ++h) tensor[h] += input_gate_shift;
    model.slab().upload(SlabPart::Params, name, to_float(tensor), ctx.stream());
  }
}

ref::XlstmParams download_params(XlstmModel& model, const ref::XlstmDims& dims,
                                 const StreamContext& ctx) {
  return th::read_reference_params(
      model.slab(), ctx.stream(), ref::xlstm_zero_params(dims),
      [](ref::XlstmParams& p) -> auto& { return p.tensors; });
}

// One GPU step against the reference.
MseStepResult check_against_reference(const XlstmConfig& config, const ModelShape& shape,
                                   std::size_t batch, bool random_parameters, std::uint64_t seed,
                                   double input_gate_shift = 0.0) {
  StreamContext ctx;
  XlstmModel model(shape, config, seed);
  const ref::XlstmDims dims = reference_dims(config, shape);
  std::mt19937_64 rng(seed);
  if (random_parameters) set_random_params(model, dims, rng, input_gate_shift, ctx);
  const ref::XlstmParams params = download_params(model, dims, ctx);
  std::vector<double> x = random_values(batch * shape.window * shape.features, -1.5, 1.5, rng);
  const std::vector<float> xf = to_float(x);
  x.assign(xf.begin(), xf.end());  // the reference sees the float inputs
  const std::vector<double> target = random_values(batch * shape.outputs, -1, 1, rng);
  const std::vector<float> grads0 = th::random_slab_values(model.slab(), rng);
  const MseStepResult r = th::gpu_mse_step(model, ctx, xf, to_float(target), batch, grads0);
  const std::vector<double> pred = ref::xlstm_forward(dims, params, x, batch);
  const th::MseReference mse = th::reference_mse(pred, target);
  const ref::XlstmGradients g = ref::xlstm_backward(dims, params, x, batch, mse.dpred);
  std::printf("%s, batch %zu, L %zu, F %zu, outputs %zu, %s parameters:\n",
              model.describe().c_str(), batch, shape.window, shape.features, shape.outputs,
              random_parameters ? "random" : "init");
  th::expect_mse_step_agrees(r, pred, mse.loss, kRtol, kAtol, kPrintWidth);
  for (const auto& [name, tensor] : g.params.tensors)
    th::expect_gradient_agrees(name, r.grads_added, model.slab(), tensor, kRtol, kAtol,
                               kPrintWidth);
  return r;
}

XlstmConfig tiny(std::size_t blocks, long slstm_at) {
  XlstmConfig c;
  c.d_model = 8;
  c.heads = 2;
  c.blocks = blocks;
  c.slstm_at = slstm_at;
  return c;
}

TEST(XlstmModel, GradientsMatchReference) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(tiny(2, 1), ModelShape{6, 3, 2, 4}, 3, true, 71);
  check_against_reference(tiny(3, 0), ModelShape{9, 4, 1, 40}, 37, true, 72);
  check_against_reference(tiny(2, -1), ModelShape{6, 3, 2, 4}, 3, true, 73);
}

TEST(XlstmModel, GradientsMatchReferenceEdges) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(tiny(2, 1), ModelShape{1, 2, 1, 1}, 1, true, 74);
  check_against_reference(tiny(2, 1), ModelShape{33, 2, 1, 2}, 2, true, 75);
}

TEST(XlstmModel, GradientsMatchReferenceAtInit) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(XlstmConfig{}, ModelShape{16, 8, 1, 5}, 5, false, 76);
}

TEST(XlstmModel, LargeInputGatesStayFiniteAndExact) {
  // Input-gate biases + 80: exp(i~) alone is near float's limit (3.4e38 = exp(88.7)) and its sums
  // over the window pass it; the stabilized cell's exp arguments stay <= 0.
  RESIDENT_REQUIRE_GPU();
  const MseStepResult r = check_against_reference(tiny(2, 1), ModelShape{24, 3, 2, 4}, 3, true,
                                                  77, 80.0);
  for (const float v : r.prediction) EXPECT_TRUE(std::isfinite(v));
  for (const float g : r.grads_added) EXPECT_TRUE(std::isfinite(g));
}

void graph_equals_eager(const XlstmConfig& config) {
  const th::ReplayComparison r = th::expect_mse_graph_replay_equals_eager<XlstmModel>(
      96, ModelShape{64, 32, 1, 96}, config, 81);
  if (r.compared == 0) return;
  std::printf("%s: 3 eager steps and 3 graph replays, %zu parameters equal bit for bit\n",
              r.description.c_str(), r.compared);
}

TEST(XlstmModel, GraphReplayEqualsEagerBitForBit) {
  RESIDENT_REQUIRE_GPU();
  graph_equals_eager(XlstmConfig{});
}

TEST(XlstmModel, BenchmarkShapeStep) {
  RESIDENT_REQUIRE_GPU();
  const ModelShape shape{64, 32, 1, 256};
  const std::size_t batch = 256;
  StreamContext ctx;
  auto base = resident::models::make_supervised_model("xlstm", shape, 5);
  auto* model = dynamic_cast<XlstmModel*>(base.get());
  ASSERT_NE(model, nullptr);
  std::mt19937_64 rng(6);
  th::MseStepBuffers buffers(batch * 64 * 32, batch, rng);
  const th::MseTrainStep step = buffers.step(model, batch, resident::nn::AdamWConfig{});
  step.enqueue(ctx);
  const th::StepGraph graph(ctx.stream(), cudaStreamCaptureModeThreadLocal,
                            [&] { step.enqueue(ctx); });
  for (int i = 0; i < 3; ++i) graph.launch(ctx.stream());
  constexpr int kReps = 20;
  const float ms = th::mean_event_ms(ctx.stream(), kReps, [&] { graph.launch(ctx.stream()); });
  const float l = buffers.loss.download()[0];
  std::printf("%s, batch 256, L 64, F 32: train step %.3f ms (graph-replayed, mean of %d), loss "
              "%.4f\n",
              model->describe().c_str(), ms, kReps, l);
  EXPECT_TRUE(std::isfinite(l));
}

}  // namespace
