// The GPU TFT model (lib/models/tft/tft_model.h) against the double reference
// (tests/reference/tft_reference.h), on a GPU (each test calls RESIDENT_REQUIRE_GPU first):
//   - the predictions, the pinball loss (kernels/nn/losses.h, the trainer's) and every parameter
//     tensor's gradient at tiny configs with random parameters (two heads; three heads with two
//     outputs; one step; batch 1) and at the model's own init; x random, predictions and
//     dpredictions poisoned with NaN before the run, the gradients starting from random values
//     (the backward must add exactly its share);
//   - the variable selection and attention weights against the reference's;
//   - a CUDA graph of zero_grads + forward + pinball + backward + clip_and_adamw_step replayed 3
//     times equals 3 eager steps bit for bit (memcmp of the parameters);
//   - one train step at the benchmark shape (batch 256, L 64, F 32, the registry's config) with a
//     finite loss, and its graph-replayed time printed (target <= 1.2 ms);
//   - the same checks with TftConfig::fused_variable_grns on (the fused per-variable GRN
//     kernels, kernels/models/tft/tft_variable_grn.h), plus a case of 384 rows (two 256-row
//     chunks of the fused backward, the second partial), and its benchmark-shape step time.
// Tolerances: |gpu - ref| <= atol + rtol |ref| with rtol 5e-3, atol 5e-4 (fp32 without TF32
// against double through a 64-wide GRN stack, an LSTM and five LayerNorms).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/nn/losses.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/models/model_registry.h"
#include "lib/models/tft/tft_model.h"
#include "tests/models/support/agreement.h"
#include "tests/models/support/graph_step.h"
#include "tests/models/support/harness_values.h"
#include "tests/models/support/poisoned_step.h"
#include "tests/models/support/reference_params.h"
#include "tests/reference/nn_reference.h"
#include "tests/reference/tft_reference.h"
#include "tests/support/gpu.h"
#include "tests/support/slab_values.h"

namespace {

namespace ref = resident::reference;
namespace th = resident::test;
using resident::DeviceBuffer;
using resident::StreamContext;
using resident::models::ModelShape;
using resident::models::TftConfig;
using resident::models::TftModel;
using resident::nn::SlabPart;

constexpr double kRtol = 5e-3;
constexpr double kAtol = 5e-4;
constexpr int kPrintWidth = 24;  // the agreement lines' name column

using th::Agreement;
using th::agreement;
using th::device_copy;
using th::random_values;
using th::to_float;

void print_agreement(const std::string& what, const Agreement& a, double rtol, double atol) {
  th::print_agreement(what, a, rtol, atol, kPrintWidth);
}

ref::TftDims reference_dims(const TftConfig& c, const ModelShape& s) {
  ref::TftDims d;
  d.window = s.window;
  d.features = s.features;
  d.hidden = c.hidden;
  d.heads = c.heads;
  d.prescale = c.prescale;
  d.outputs = s.outputs;
  d.quantiles = c.quantiles.size();
  return d;
}

// One GPU forward, pinball loss and backward against the reference. shape.outputs is the
// trainer's (before the quantiles).
void check_against_reference(const TftConfig& config, const ModelShape& shape, std::size_t batch,
                             bool random_parameters, std::uint64_t seed) {
  StreamContext ctx;
  TftModel model(shape, config, seed);
  const ref::TftDims dims = reference_dims(config, shape);
  ASSERT_EQ(model.shape().outputs, dims.predictions());
  std::mt19937_64 rng(seed);
  std::vector<ref::TftTensor> params = ref::tft_zero_params(dims);
  th::set_or_read_params(params, model.slab(), random_parameters, rng, ctx.stream());
  const std::vector<float> xf =
      to_float(random_values(batch * shape.window * shape.features, -1.5, 1.5, rng));
  const std::vector<double> x(xf.begin(), xf.end());
  const std::size_t rows = batch * shape.outputs, K = config.quantiles.size();
  const std::vector<float> yf = to_float(random_values(rows, -1.0, 1.0, rng));
  const std::vector<double> y(yf.begin(), yf.end());
  const std::vector<double> taus(config.quantiles.begin(), config.quantiles.end());
  // Random in the tensors, 0 in the padding between them (ParamSlab::upload refuses a nonzero
  // padding element; every tensor starts at a multiple of 64 floats).
  const std::vector<float> grads0 = th::random_slab_values(model.slab(), rng);

  const std::size_t n = rows * K;
  DeviceBuffer<float> dx = device_copy(xf), dy = device_copy(yf);
  DeviceBuffer<float> dtaus = device_copy(config.quantiles);
  DeviceBuffer<float> pred(n), dpred(n), loss(1);
  DeviceBuffer<float> partials(resident::kernels::loss_partials_count(n));
  const std::vector<float> grads =
      th::run_poisoned_step(model, ctx, dx.data(), batch, pred, dpred, grads0, [&] {
        resident::kernels::launch_pinball_loss(loss.data(), partials.data(), partials.size(),
                                               pred.data(), dy.data(), dtaus.data(), rows, K,
                                               ctx.stream());
        resident::kernels::launch_pinball_loss_backward(
            dpred.data(), pred.data(), dy.data(), dtaus.data(), rows, K, 1.0f,
            resident::nn::GradMode::Overwrite, ctx.stream());
      });

  ref::TftForwardDetail detail;
  const std::vector<double> want = ref::tft_forward(dims, params, x, batch, &detail);
  const double want_loss = ref::pinball_loss(rows, want, y, taus);
  // The reference gradient at the GPU's own predictions' signs: a prediction within rounding of
  // its target could take the other slope in fp32; the test's targets keep |y - pred| >> 1e-5
  // with probability ~1, and the pinball slopes are the same for both.
  std::vector<double> dwant(n, 0.0);
  ref::pinball_loss_backward(rows, want, y, taus, 1.0, dwant, ref::GradMode::Overwrite);
  const std::vector<ref::TftTensor> g = ref::tft_backward(dims, params, x, batch, dwant);

  std::printf("%s, batch %zu, %s parameters:\n", model.describe().c_str(), batch,
              random_parameters ? "random" : "init");
  const Agreement pa = agreement(pred.download(), want, kRtol, kAtol);
  print_agreement("predictions", pa, kRtol, kAtol);
  EXPECT_LE(pa.share, 1.0) << "prediction " << pa.worst;
  const Agreement la = agreement(loss.download(), std::vector<double>{want_loss}, kRtol, kAtol);
  print_agreement("pinball loss", la, kRtol, kAtol);
  EXPECT_LE(la.share, 1.0);
  std::vector<float> selection(batch * shape.window * shape.features);
  RESIDENT_CUDA_CHECK(cudaMemcpy(selection.data(), model.selection_weights(),
                                 selection.size() * sizeof(float), cudaMemcpyDeviceToHost));
  const Agreement sa = agreement(selection, detail.selection, kRtol, kAtol);
  print_agreement("selection weights", sa, kRtol, kAtol);
  EXPECT_LE(sa.share, 1.0);
  std::vector<float> attention(batch * shape.window);
  RESIDENT_CUDA_CHECK(cudaMemcpy(attention.data(), model.attention_weights(),
                                 attention.size() * sizeof(float), cudaMemcpyDeviceToHost));
  const Agreement aa = agreement(attention, detail.attention, kRtol, kAtol);
  print_agreement("attention weights", aa, kRtol, kAtol);
  EXPECT_LE(aa.share, 1.0);
  for (const ref::TftTensor& t : g)
    th::expect_gradient_agrees(t.name, grads, model.slab(), t.values, kRtol, kAtol, kPrintWidth);
}

TftConfig tiny(std::size_t hidden, std::size_t heads, std::size_t prescale) {
  TftConfig c;
  c.hidden = hidden;
  c.heads = heads;
  c.prescale = prescale;
  return c;
}

TEST(TftModel, GradientsMatchReferenceTwoHeads) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(tiny(8, 2, 2), ModelShape{6, 3, 1, 5}, 5, true, 1);
}

TEST(TftModel, GradientsMatchReferenceThreeHeadsTwoOutputs) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(tiny(12, 3, 3), ModelShape{5, 4, 2, 4}, 3, true, 2);
}

TEST(TftModel, GradientsMatchReferenceOneStepAndBatchOne) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(tiny(8, 2, 2), ModelShape{1, 3, 1, 2}, 2, true, 3);
  check_against_reference(tiny(8, 2, 2), ModelShape{7, 2, 1, 3}, 1, true, 4);
}

TEST(TftModel, GradientsMatchReferenceAtInitWide) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(TftConfig{}, ModelShape{12, 5, 1, 3}, 3, false, 5);
  check_against_reference(tiny(64, 4, 4), ModelShape{8, 3, 1, 2}, 2, false, 6);
}

TftConfig fused(TftConfig c) {
  c.fused_variable_grns = true;
  return c;
}

TEST(TftModel, FusedVariableGrnsGradientsMatchReference) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(fused(tiny(8, 2, 2)), ModelShape{6, 3, 1, 5}, 5, true, 1);
  check_against_reference(fused(tiny(12, 3, 3)), ModelShape{5, 4, 2, 4}, 3, true, 2);
  check_against_reference(fused(tiny(8, 2, 2)), ModelShape{1, 3, 1, 2}, 2, true, 3);
  check_against_reference(fused(tiny(8, 2, 2)), ModelShape{7, 2, 1, 3}, 1, true, 4);
  // 12 x 32 = 384 rows: two chunks of the fused backward, the second a partial sub-tile.
  check_against_reference(fused(tiny(8, 2, 2)), ModelShape{32, 3, 1, 12}, 12, true, 7);
}

TEST(TftModel, FusedVariableGrnsGradientsMatchReferenceAtInitWide) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(fused(TftConfig{}), ModelShape{12, 5, 1, 3}, 3, false, 5);
  check_against_reference(fused(tiny(64, 4, 4)), ModelShape{8, 3, 1, 2}, 2, false, 6);
}

struct TrainStep {
  TftModel* model;
  const float *x, *y, *taus;
  float *pred, *dpred, *loss, *partials;
  std::size_t partials_count, batch, rows, quantiles;
  resident::nn::AdamWConfig adamw;

  void enqueue(const StreamContext& ctx) const {
    model->slab().zero_grads(ctx.stream());
    model->forward(ctx, x, batch, pred);
    resident::kernels::launch_pinball_loss(loss, partials, partials_count, pred, y, taus, rows,
                                           quantiles, ctx.stream());
    resident::kernels::launch_pinball_loss_backward(dpred, pred, y, taus, rows, quantiles, 1.0f,
                                                    resident::nn::GradMode::Overwrite,
                                                    ctx.stream());
    model->backward(ctx, x, dpred, batch);
    model->slab().clip_and_adamw_step(1.0f, adamw, ctx.stream());
  }
};

struct StepBuffers {
  DeviceBuffer<float> x, y, taus, pred, dpred, loss, partials;
  StepBuffers(const ModelShape& shape, std::size_t batch, const TftConfig& config,
              std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    x = device_copy(to_float(random_values(batch * shape.window * shape.features, -1, 1, rng)));
    y = device_copy(to_float(random_values(batch * shape.outputs, -1, 1, rng)));
    taus = device_copy(config.quantiles);
    const std::size_t n = batch * shape.outputs * config.quantiles.size();
    pred = DeviceBuffer<float>(n);
    dpred = DeviceBuffer<float>(n);
    loss = DeviceBuffer<float>(1);
    partials = DeviceBuffer<float>(resident::kernels::loss_partials_count(n));
  }
  TrainStep step(TftModel* model, const ModelShape& shape, std::size_t batch,
                 const TftConfig& config) {
    resident::nn::AdamWConfig adamw;
    adamw.weight_decay = 0.01;
    return {model,      x.data(),        y.data(),     taus.data(),
            pred.data(), dpred.data(),   loss.data(),  partials.data(),
            partials.size(), batch, batch * shape.outputs, config.quantiles.size(), adamw};
  }
};

// 3 eager steps against 3 replays of a captured step, from the same init: equal bit for bit.
void check_graph_replay_equals_eager(const TftConfig& config) {
  const ModelShape shape{16, 5, 2, 24};
  const std::size_t batch = 24;
  StreamContext ctx;
  TftModel eager(shape, config, 81), graphed(shape, config, 81);
  StepBuffers buffers(shape, batch, config, 82);
  const TrainStep a = buffers.step(&eager, shape, batch, config);
  TrainStep b = a;
  b.model = &graphed;
  th::run_eager_then_replayed(ctx, 3, [&] { a.enqueue(ctx); }, [&] { b.enqueue(ctx); });
  th::expect_replay_equals_eager(eager.slab(), graphed.slab(),
                                 TftModel(shape, config, 81).slab(), ctx.stream());
}

TEST(TftModel, GraphReplayEqualsEagerBitForBit) {
  RESIDENT_REQUIRE_GPU();
  check_graph_replay_equals_eager(tiny(16, 4, 4));
}

TEST(TftModel, FusedVariableGrnsGraphReplayEqualsEagerBitForBit) {
  RESIDENT_REQUIRE_GPU();
  check_graph_replay_equals_eager(fused(tiny(16, 4, 4)));
}

TEST(TftModel, RejectsBadBatches) {
  RESIDENT_REQUIRE_GPU();
  const ModelShape shape{4, 2, 1, 3};
  StreamContext ctx;
  TftModel model(shape, tiny(8, 2, 2), 1);
  DeviceBuffer<float> x(4 * 4 * 2), pred(4 * 3);
  EXPECT_THROW(model.forward(ctx, x.data(), 4, pred.data()), resident::Error);
  EXPECT_THROW(model.backward(ctx, x.data(), pred.data(), 2), resident::Error);  // no forward
}

TEST(TftModel, BenchmarkShapeStep) {
  RESIDENT_REQUIRE_GPU();
  const ModelShape shape{64, 32, 1, 256};
  const std::size_t batch = 256;
  StreamContext ctx;
  auto made = resident::models::make_supervised_model("tft", shape, 1);
  auto* model = dynamic_cast<TftModel*>(made.get());
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->shape().outputs, 3u);
  EXPECT_EQ(model->loss_kind(), resident::models::LossKind::Pinball);
  std::printf("%s: %zu parameters\n", model->describe().c_str(), model->slab().total_elements());
  StepBuffers buffers(shape, batch, model->config(), 5);
  const TrainStep step = buffers.step(model, shape, batch, model->config());
  const double ms =
      th::expect_wall_timed_step(ctx, [&] { step.enqueue(ctx); }, buffers.loss, 3, 20);
  std::printf("TFT train step (graph replay, batch 256): %.3f ms (target <= 1.2 ms)\n", ms);
}

// The registry's config with the fused per-variable GRNs; compare with BenchmarkShapeStep's line
// from the same run (same card).
TEST(TftModel, BenchmarkShapeStepFusedVariableGrns) {
  RESIDENT_REQUIRE_GPU();
  const ModelShape shape{64, 32, 1, 256};
  const std::size_t batch = 256;
  StreamContext ctx;
  TftModel model(shape, fused(TftConfig{}), 1);
  std::printf("%s: %zu parameters\n", model.describe().c_str(), model.slab().total_elements());
  StepBuffers buffers(shape, batch, model.config(), 5);
  const TrainStep step = buffers.step(&model, shape, batch, model.config());
  const double ms =
      th::expect_wall_timed_step(ctx, [&] { step.enqueue(ctx); }, buffers.loss, 3, 20);
  std::printf("TFT train step (graph replay, batch 256, fused variable GRNs): %.3f ms (target <= "
              "1.2 ms)\n",
              ms);
}

}  // namespace
