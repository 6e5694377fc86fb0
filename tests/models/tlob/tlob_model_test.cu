// The GPU TLOB model (lib/models/tlob/tlob_model.h) and the classification kernels
// (kernels/data/trend_labels.h, cross_entropy_loss.h, class_confusion.h, class_metrics.h) against
// the double reference (tests/reference/tlob_reference.h), on a GPU (each test calls
// RESIDENT_REQUIRE_GPU first):
//   - the logits, the cross-entropy loss and every parameter tensor's gradient at tiny configs
//     with random parameters (one head; two heads; a head with a hidden GELU layer; batch 1) and
//     at the model's own init; logits and dlogits poisoned with NaN before the run, the gradients
//     starting from random values (the backward must add exactly its share);
//   - trend labels of random windows of a random series, cross-entropy and its gradient,
//     confusion counts, accuracy and macro F1 against the reference (labels and counts exact);
//   - a CUDA graph of zero_grads + forward + cross-entropy + backward + clip_and_adamw_step
//     replayed 3 times equals 3 eager steps bit for bit (memcmp of the parameters);
//   - one train step at the benchmark shape (batch 256, L 64, F 32, H 64, 4 pairs, 1 head) with a
//     finite loss, and its graph-replayed time printed (target <= 2.5 ms).
// Tolerances: |gpu - ref| <= atol + rtol |ref| with rtol 5e-3, atol 5e-4 (fp32 without TF32
// against double through up to four attention layers, LayerNorms and GELUs); the classification
// kernels' losses rtol 1e-5, atol 1e-6.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/data/class_confusion.h"
#include "kernels/data/class_metrics.h"
#include "kernels/data/cross_entropy_loss.h"
#include "kernels/data/trend_labels.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/models/model_registry.h"
#include "lib/models/tlob/tlob_model.h"
#include "tests/models/support/agreement.h"
#include "tests/models/support/graph_step.h"
#include "tests/models/support/harness_values.h"
#include "tests/models/support/poisoned_step.h"
#include "tests/models/support/reference_params.h"
#include "tests/reference/tlob_reference.h"
#include "tests/support/gpu.h"
#include "tests/support/slab_values.h"

namespace {

namespace ref = resident::reference;
namespace kd = resident::kernels::data;
namespace th = resident::test;
using resident::DeviceBuffer;
using resident::StreamContext;
using resident::models::ModelShape;
using resident::models::TlobConfig;
using resident::models::TlobModel;
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

ref::TlobDims reference_dims(const TlobConfig& c, const ModelShape& s) {
  ref::TlobDims d;
  d.window = s.window;
  d.features = s.features;
  d.hidden = c.hidden;
  d.pairs = c.pairs;
  d.heads = c.heads;
  d.classes = s.outputs;
  d.head_limit = c.head_limit;
  return d;
}

// One GPU forward, cross-entropy and backward against the reference.
void check_against_reference(const TlobConfig& config, const ModelShape& shape,
                             std::size_t batch, bool random_parameters, std::uint64_t seed) {
  StreamContext ctx;
  TlobModel model(shape, config, seed);
  const ref::TlobDims dims = reference_dims(config, shape);
  std::mt19937_64 rng(seed);
  std::vector<ref::TlobTensor> params = ref::tlob_zero_params(dims);
  th::set_or_read_params(params, model.slab(), random_parameters, rng, ctx.stream());
  const std::vector<float> xf =
      to_float(random_values(batch * shape.window * shape.features, -1.5, 1.5, rng));
  const std::vector<double> x(xf.begin(), xf.end());
  std::vector<std::int32_t> labels(batch);
  for (std::size_t i = 0; i < batch; ++i) labels[i] = static_cast<std::int32_t>(rng() % 3);
  const std::vector<float> grads0 = resident::test::random_slab_values(model.slab(), rng);

  const std::size_t n = batch * shape.outputs;
  DeviceBuffer<float> dx = device_copy(xf), logits(n), dlogits(n), loss(1);
  DeviceBuffer<std::int32_t> dlabels = device_copy(labels);
  const std::vector<float> grads =
      th::run_poisoned_step(model, ctx, dx.data(), batch, logits, dlogits, grads0, [&] {
        kd::launch_cross_entropy_loss(loss.data(), dlogits.data(), logits.data(), dlabels.data(),
                                      batch, shape.outputs, 1.0f, ctx.stream());
      });

  const std::vector<double> want = ref::tlob_forward(dims, params, x, batch);
  const double want_loss = ref::cross_entropy(want, labels, batch, shape.outputs);
  const std::vector<double> dwant = ref::cross_entropy_backward(want, labels, batch, shape.outputs);
  const std::vector<ref::TlobTensor> g = ref::tlob_backward(dims, params, x, batch, dwant);

  std::printf("%s, batch %zu, %s parameters:\n", model.describe().c_str(), batch,
              random_parameters ? "random" : "init");
  const Agreement la = agreement(logits.download(), want, kRtol, kAtol);
  print_agreement("logits", la, kRtol, kAtol);
  EXPECT_LE(la.share, 1.0) << "logit " << la.worst;
  const Agreement ca = agreement(loss.download(), std::vector<double>{want_loss}, kRtol, kAtol);
  print_agreement("cross-entropy", ca, kRtol, kAtol);
  EXPECT_LE(ca.share, 1.0);
  for (const ref::TlobTensor& t : g)
    th::expect_gradient_agrees(t.name, grads, model.slab(), t.values, kRtol, kAtol, kPrintWidth);
}

TlobConfig tiny(std::size_t hidden, std::size_t pairs, std::size_t heads,
                std::size_t head_limit = 128) {
  TlobConfig c;
  c.hidden = hidden;
  c.pairs = pairs;
  c.heads = heads;
  c.head_limit = head_limit;
  return c;
}

TEST(TlobModel, GradientsMatchReferenceOneHead) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(tiny(8, 2, 1), ModelShape{8, 3, 3, 5}, 5, true, 1);
}

TEST(TlobModel, GradientsMatchReferenceTwoHeads) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(tiny(12, 2, 2), ModelShape{8, 4, 3, 4}, 3, true, 2);
}

TEST(TlobModel, GradientsMatchReferenceHiddenHeadLayerAndBatchOne) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(tiny(8, 1, 1, 2), ModelShape{16, 3, 3, 2}, 1, true, 3);
  check_against_reference(tiny(8, 1, 1, 2), ModelShape{16, 3, 3, 2}, 2, true, 4);
}

TEST(TlobModel, GradientsMatchReferenceAtInit) {
  RESIDENT_REQUIRE_GPU();
  check_against_reference(tiny(16, 2, 1), ModelShape{16, 6, 3, 7}, 7, false, 5);
}

TEST(TlobClassification, KernelsMatchTheReference) {
  RESIDENT_REQUIRE_GPU();
  StreamContext ctx;
  std::mt19937_64 rng(9);
  const std::size_t rows = 300, columns = 4, window = 16, horizon = 3, batch = 70;
  const std::vector<float> series = to_float(random_values(rows * columns, -2.0, 2.0, rng));
  std::vector<std::uint32_t> order(batch);
  for (std::uint32_t& o : order)
    o = static_cast<std::uint32_t>(rng() % (rows - window - horizon + 1));
  DeviceBuffer<float> dseries = device_copy(series);
  DeviceBuffer<std::uint32_t> dorder = device_copy(order);
  DeviceBuffer<std::int32_t> labels(batch);
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(labels.data(), 0xFF, labels.bytes(), ctx.stream()));
  kd::WindowLayout layout;
  layout.series = dseries.data();
  layout.rows = rows;
  layout.columns = columns;
  layout.window = window;
  layout.features = columns;
  layout.horizon = horizon;
  layout.targets = 1;
  kd::WindowSelection selection;
  selection.order = dorder.data();
  const double theta = 0.3;
  kd::launch_trend_labels(labels.data(), layout, selection, {2, horizon, theta}, batch,
                          ctx.stream());
  std::vector<std::int32_t> want(batch);
  for (std::size_t i = 0; i < batch; ++i)
    want[i] = ref::trend_label(ref::trend_change(series, columns, 2, order[i], window, horizon),
                               theta);
  EXPECT_EQ(labels.download(), want);

  const std::vector<float> logits = to_float(random_values(batch * 3, -3.0, 3.0, rng));
  const std::vector<double> logits_d(logits.begin(), logits.end());
  DeviceBuffer<float> dlogits_in = device_copy(logits), loss(1), dlogits(batch * 3);
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(dlogits.data(), 0xFF, dlogits.bytes(), ctx.stream()));
  kd::launch_cross_entropy_loss(loss.data(), dlogits.data(), dlogits_in.data(), labels.data(),
                                batch, 3, 1.0f, ctx.stream());
  const Agreement la = agreement(loss.download(),
                                 std::vector<double>{ref::cross_entropy(logits_d, want, batch, 3)},
                                 1e-5, 1e-6);
  print_agreement("cross-entropy", la, 1e-5, 1e-6);
  EXPECT_LE(la.share, 1.0);
  const Agreement ga = agreement(dlogits.download(),
                                 ref::cross_entropy_backward(logits_d, want, batch, 3), 1e-5, 1e-6);
  print_agreement("d logits", ga, 1e-5, 1e-6);
  EXPECT_LE(ga.share, 1.0);

  DeviceBuffer<unsigned long long> confusion(9);
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(confusion.data(), 0, confusion.bytes(), ctx.stream()));
  // Two calls (batches of 40 and 30 rows) accumulate.
  kd::launch_class_confusion(confusion.data(), dlogits_in.data(), labels.data(), 40, 3,
                             ctx.stream());
  kd::launch_class_confusion(confusion.data(), dlogits_in.data() + 40 * 3, labels.data() + 40, 30,
                             3, ctx.stream());
  const std::vector<std::uint64_t> counts = ref::confusion_counts(logits_d, want, batch, 3);
  const std::vector<unsigned long long> got = confusion.download();
  for (std::size_t i = 0; i < 9; ++i) EXPECT_EQ(got[i], counts[i]) << "cell " << i;
  DeviceBuffer<kd::FloatPair> summary(2);
  kd::launch_class_epoch_summary(summary.data(), nullptr, confusion.data(), 3, ctx.stream());
  const ref::ClassMetrics m = ref::class_metrics(counts, 3);
  const kd::FloatPair scores = summary.download()[1];
  EXPECT_EQ(scores.first, static_cast<float>(m.macro_f1));
  EXPECT_EQ(scores.second, static_cast<float>(m.accuracy));
}

struct TrainStep {
  TlobModel* model;
  const float* x;
  const std::int32_t* labels;
  float *logits, *dlogits, *loss;
  std::size_t batch;
  resident::nn::AdamWConfig adamw;

  void enqueue(const StreamContext& ctx) const {
    model->slab().zero_grads(ctx.stream());
    model->forward(ctx, x, batch, logits);
    kd::launch_cross_entropy_loss(loss, dlogits, logits, labels, batch, 3, 1.0f, ctx.stream());
    model->backward(ctx, x, dlogits, batch);
    model->slab().clip_and_adamw_step(1.0f, adamw, ctx.stream());
  }
};

TEST(TlobModel, GraphReplayEqualsEagerBitForBit) {
  RESIDENT_REQUIRE_GPU();
  const ModelShape shape{32, 8, 3, 48};
  const std::size_t batch = 48;
  const TlobConfig config = tiny(16, 2, 2);
  StreamContext ctx;
  TlobModel eager(shape, config, 81), graphed(shape, config, 81);
  std::mt19937_64 rng(82);
  DeviceBuffer<float> x = device_copy(to_float(random_values(batch * 32 * 8, -1, 1, rng)));
  std::vector<std::int32_t> labels(batch);
  for (std::int32_t& l : labels) l = static_cast<std::int32_t>(rng() % 3);
  DeviceBuffer<std::int32_t> dlabels = device_copy(labels);
  DeviceBuffer<float> logits(batch * 3), dlogits(batch * 3), loss(1);
  resident::nn::AdamWConfig adamw;
  adamw.weight_decay = 0.01;
  const TrainStep a{&eager, x.data(), dlabels.data(), logits.data(), dlogits.data(), loss.data(),
                    batch, adamw};
  TrainStep b = a;
  b.model = &graphed;
  th::run_eager_then_replayed(ctx, 3, [&] { a.enqueue(ctx); }, [&] { b.enqueue(ctx); });
  th::expect_replay_equals_eager(eager.slab(), graphed.slab(),
                                 TlobModel(shape, config, 81).slab(), ctx.stream());
}

TEST(TlobModel, BenchmarkShapeStep) {
  RESIDENT_REQUIRE_GPU();
  const ModelShape shape{64, 32, 7, 256};  // the registry makes outputs = 3 classes
  const std::size_t batch = 256;
  StreamContext ctx;
  auto made = resident::models::make_supervised_model("tlob", shape, 1);
  auto* model = dynamic_cast<TlobModel*>(made.get());
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->shape().outputs, 3u);
  EXPECT_EQ(model->loss_kind(), resident::models::LossKind::CrossEntropy);
  std::printf("%s: %zu parameters\n", model->describe().c_str(),
              model->slab().total_elements());
  std::mt19937_64 rng(5);
  DeviceBuffer<float> x = device_copy(to_float(random_values(batch * 64 * 32, -1, 1, rng)));
  std::vector<std::int32_t> labels(batch);
  for (std::int32_t& l : labels) l = static_cast<std::int32_t>(rng() % 3);
  DeviceBuffer<std::int32_t> dlabels = device_copy(labels);
  DeviceBuffer<float> logits(batch * 3), dlogits(batch * 3), loss(1);
  const TrainStep step{model, x.data(), dlabels.data(), logits.data(), dlogits.data(),
                       loss.data(), batch, resident::nn::AdamWConfig{}};
  const double ms = th::expect_wall_timed_step(ctx, [&] { step.enqueue(ctx); }, loss, 3, 20);
  std::printf("TLOB train step (graph replay, batch 256): %.3f ms (target <= 2.5 ms)\n", ms);
}

}  // namespace
