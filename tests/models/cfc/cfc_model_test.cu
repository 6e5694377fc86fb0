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

#include "kernels/core/error.h"
#include "kernels/nn/losses.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/models/cfc/cfc_model.h"
#include "lib/models/model_registry.h"
#include "tests/models/cfc/cfc_test_cases.h"
#include "tests/reference/cfc_reference.h"
#include "tests/support/gpu.h"
#include "tests/support/slab_values.h"

namespace {

namespace ref = resident::reference;
using resident::DeviceBuffer;
using resident::StreamContext;
using resident::models::CfcConfig;
using resident::models::CfcMode;
using resident::models::CfcModel;
using resident::models::ModelShape;
using resident::nn::SlabPart;

constexpr double kRtol = resident::test::kCfcTestRtol;
constexpr double kAtol = resident::test::kCfcTestAtol;

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

std::vector<double> random_values(std::size_t n, double low, double high, std::mt19937_64& rng) {
  return resident::test::cfc_uniform(n, low, high, rng);
}

DeviceBuffer<float> device_copy(const std::vector<float>& host) {
  DeviceBuffer<float> b(host.size());
  b.upload(host);
  return b;
}

// Random parameters (tests/models/cfc/cfc_test_cases.h) uploaded; the reference reads them back
// (the float values the GPU uses).
void set_random_params(CfcModel& model, const ref::CfcDims& dims, std::mt19937_64& rng,
                       const StreamContext& ctx) {
  ref::CfcParams p = resident::test::cfc_random_params(dims, rng);
  for (auto& [name, tensor] : ref::cfc_named_tensors(p))
    model.slab().upload(SlabPart::Params, name, to_float(*tensor), ctx.stream());
}

ref::CfcParams download_params(const CfcModel& model, const ref::CfcDims& dims,
                               const StreamContext& ctx) {
  const std::vector<float> flat = model.slab().download(SlabPart::Params, ctx.stream());
  ref::CfcParams p = ref::cfc_zero_params(dims);
  for (auto& [name, tensor] : ref::cfc_named_tensors(p)) {
    const std::size_t offset = model.slab().layout().tensor(name).offset;
    for (std::size_t i = 0; i < tensor->size(); ++i) (*tensor)[i] = flat[offset + i];
  }
  return p;
}

struct StepResult {
  std::vector<float> prediction;
  float loss = 0.0f;
  std::vector<float> grads_added;
};

StepResult gpu_step(CfcModel& model, const StreamContext& ctx, const std::vector<float>& x,
                    const std::vector<float>& target, std::size_t batch,
                    const std::vector<float>& grads0) {
  const std::size_t n = batch * model.shape().outputs;
  DeviceBuffer<float> dx = device_copy(x), dtarget = device_copy(target);
  DeviceBuffer<float> pred(n), dpred(n), loss(1);
  DeviceBuffer<float> partials(resident::kernels::loss_partials_count(n));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(pred.data(), 0xFF, pred.bytes(), ctx.stream()));  // NaN
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(dpred.data(), 0xFF, dpred.bytes(), ctx.stream()));
  model.slab().upload(SlabPart::Grads, grads0, ctx.stream());
  model.forward(ctx, dx.data(), batch, pred.data());
  resident::kernels::launch_mse_loss(loss.data(), partials.data(), partials.size(), pred.data(),
                                     dtarget.data(), n, ctx.stream());
  resident::kernels::launch_mse_loss_backward(dpred.data(), pred.data(), dtarget.data(), n, 1.0f,
                                              resident::nn::GradMode::Overwrite, ctx.stream());
  model.backward(ctx, dx.data(), dpred.data(), batch);
  ctx.synchronize();
  StepResult r;
  r.prediction = pred.download();
  r.loss = loss.download()[0];
  r.grads_added = model.slab().download(SlabPart::Grads, ctx.stream());
  for (std::size_t i = 0; i < r.grads_added.size(); ++i) r.grads_added[i] -= grads0[i];
  return r;
}

struct Agreement {
  double max_abs = 0.0;
  double share = 0.0;
  std::size_t worst = 0;
};

template <class A, class B>
Agreement agreement(const A& got, const B& want, double rtol, double atol) {
  Agreement r;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    const double err = std::isfinite(g) ? std::fabs(g - w) : INFINITY;
    const double share = err / (atol + rtol * std::fabs(w));
    r.max_abs = std::max(r.max_abs, err);
    if (!(share <= r.share)) {
      r.share = share;
      r.worst = i;
    }
  }
  return r;
}

void print_agreement(const std::string& what, const Agreement& a) {
  std::printf("  %-28s max |err| %.3e  share of tolerance %.3f (rtol %.0e, atol %.0e)\n",
              what.c_str(), a.max_abs, a.share, kRtol, kAtol);
}

// One GPU step against the reference; the draws are cfc_test_cases.h's (x's time column, when
// named, holds uneven ts in [0.1, 2.5]).
StepResult check_against_reference(const CfcConfig& config, const ModelShape& shape,
                                   std::size_t batch, bool random_parameters, std::uint64_t seed) {
  StreamContext ctx;
  CfcModel model(shape, config, seed);
  const ref::CfcDims dims = resident::test::cfc_reference_dims(config, shape);
  std::mt19937_64 rng(seed);
  if (random_parameters) set_random_params(model, dims, rng, ctx);
  const ref::CfcParams params = download_params(model, dims, ctx);
  const std::vector<double> x = resident::test::cfc_random_inputs(dims, batch, rng);
  const std::vector<float> xf = to_float(x);
  const std::vector<double> target = random_values(batch * shape.outputs, -1, 1, rng);
  const std::vector<float> grads0 = resident::test::random_slab_values(model.slab(), rng);
  const StepResult r = gpu_step(model, ctx, xf, to_float(target), batch, grads0);

  const std::vector<double> pred = ref::cfc_forward(dims, params, x, batch);
  const std::size_t n = pred.size();
  double loss = 0.0;
  std::vector<double> dpred(n);
  for (std::size_t i = 0; i < n; ++i) {
    loss += (pred[i] - target[i]) * (pred[i] - target[i]) / static_cast<double>(n);
    dpred[i] = 2.0 * (pred[i] - target[i]) / static_cast<double>(n);
  }
  ref::CfcGradients g = ref::cfc_backward(dims, params, x, batch, dpred);

  std::printf("%s, batch %zu, L %zu, F %zu, outputs %zu, %s parameters:\n",
              model.describe().c_str(), batch, shape.window, shape.features, shape.outputs,
              random_parameters ? "random" : "init");
  const Agreement pa = agreement(r.prediction, pred, kRtol, kAtol);
  print_agreement("prediction", pa);
  EXPECT_LE(pa.share, 1.0) << "prediction element " << pa.worst;
  const Agreement la = agreement(std::vector<float>{r.loss}, std::vector<double>{loss}, kRtol,
                                 kAtol);
  print_agreement("MSE loss", la);
  EXPECT_LE(la.share, 1.0);
  for (auto& [name, tensor] : ref::cfc_named_tensors(g.params)) {
    const std::size_t offset = model.slab().layout().tensor(name).offset;
    const std::vector<float> got(r.grads_added.begin() + static_cast<std::ptrdiff_t>(offset),
                                 r.grads_added.begin() +
                                     static_cast<std::ptrdiff_t>(offset + tensor->size()));
    const Agreement a = agreement(got, *tensor, kRtol, kAtol);
    print_agreement(name, a);
    EXPECT_LE(a.share, 1.0) << name << " element " << a.worst << ": gpu " << got[a.worst]
                            << ", reference " << (*tensor)[a.worst];
  }
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
    const StepResult all = check_against_reference(tiny(mode, 2, 0), ModelShape{9, 4, 2, 16}, 11,
                                                   true, 81);
    const StepResult one = check_against_reference(tiny(mode, 2, 1), ModelShape{9, 4, 2, 16}, 11,
                                                   true, 81);
    EXPECT_EQ(std::memcmp(all.prediction.data(), one.prediction.data(),
                          all.prediction.size() * sizeof(float)),
              0);
    EXPECT_EQ(std::memcmp(all.grads_added.data(), one.grads_added.data(),
                          all.grads_added.size() * sizeof(float)),
              0);
  }
}

struct TrainStep {
  CfcModel* model;
  const float* x;
  const float* target;
  float* pred;
  float* dpred;
  float* loss;
  float* partials;
  std::size_t partials_count;
  std::size_t batch;
  resident::nn::AdamWConfig adamw;

  void enqueue(const StreamContext& ctx) const {
    const std::size_t n = batch * model->shape().outputs;
    model->slab().zero_grads(ctx.stream());
    model->forward(ctx, x, batch, pred);
    resident::kernels::launch_mse_loss(loss, partials, partials_count, pred, target, n,
                                       ctx.stream());
    resident::kernels::launch_mse_loss_backward(dpred, pred, target, n, 1.0f,
                                                resident::nn::GradMode::Overwrite, ctx.stream());
    model->backward(ctx, x, dpred, batch);
    model->slab().clip_and_adamw_step(1.0f, adamw, ctx.stream());
  }
};

void graph_equals_eager(const CfcConfig& config) {
  const ModelShape shape{64, 32, 1, 96};
  const std::size_t batch = 96;
  StreamContext ctx;
  CfcModel eager(shape, config, 81), graphed(shape, config, 81);
  std::mt19937_64 rng(82);
  DeviceBuffer<float> x = device_copy(to_float(random_values(batch * 64 * 32, -1, 1, rng)));
  DeviceBuffer<float> target = device_copy(to_float(random_values(batch, -1, 1, rng)));
  DeviceBuffer<float> pred(batch), dpred(batch), loss(1);
  DeviceBuffer<float> partials(resident::kernels::loss_partials_count(batch));
  resident::nn::AdamWConfig adamw;
  adamw.weight_decay = 0.01;
  const TrainStep a{&eager, x.data(), target.data(), pred.data(), dpred.data(), loss.data(),
                    partials.data(), partials.size(), batch, adamw};
  TrainStep b = a;
  b.model = &graphed;
  for (int i = 0; i < 3; ++i) a.enqueue(ctx);
  ctx.synchronize();

  cudaGraph_t graph = nullptr;
  RESIDENT_CUDA_CHECK(cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeThreadLocal));
  b.enqueue(ctx);
  RESIDENT_CUDA_CHECK(cudaStreamEndCapture(ctx.stream(), &graph));
  cudaGraphExec_t exec = nullptr;
  RESIDENT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) RESIDENT_CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream()));
  ctx.synchronize();
  RESIDENT_CUDA_CHECK(cudaGraphExecDestroy(exec));
  RESIDENT_CUDA_CHECK(cudaGraphDestroy(graph));

  const std::vector<float> pa = eager.slab().download(SlabPart::Params, ctx.stream());
  const std::vector<float> pb = graphed.slab().download(SlabPart::Params, ctx.stream());
  const std::vector<float> init =
      CfcModel(shape, config, 81).slab().download(SlabPart::Params, ctx.stream());
  ASSERT_EQ(pa.size(), pb.size());
  EXPECT_EQ(std::memcmp(pa.data(), pb.data(), pa.size() * sizeof(float)), 0)
      << "graph replay and eager steps differ";
  EXPECT_NE(std::memcmp(pa.data(), init.data(), pa.size() * sizeof(float)), 0)
      << "the steps did not change the parameters";
  EXPECT_EQ(eager.slab().read_step(ctx.stream()), 3u);
  EXPECT_EQ(graphed.slab().read_step(ctx.stream()), 3u);
  std::printf("%s: 3 eager steps and 3 graph replays, %zu parameters equal bit for bit\n",
              eager.describe().c_str(), pa.size());
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
  StreamContext ctx;
  const auto made = resident::models::make_supervised_model("cfc", shape, 91);
  auto* model = dynamic_cast<CfcModel*>(made.get());
  ASSERT_NE(model, nullptr);
  std::printf("%s, %zu parameters\n", model->describe().c_str(),
              model->slab().total_elements());
  std::mt19937_64 rng(92);
  DeviceBuffer<float> x = device_copy(to_float(random_values(batch * 64 * 32, -1, 1, rng)));
  DeviceBuffer<float> target = device_copy(to_float(random_values(batch, -1, 1, rng)));
  DeviceBuffer<float> pred(batch), dpred(batch), loss(1);
  DeviceBuffer<float> partials(resident::kernels::loss_partials_count(batch));
  const TrainStep step{model, x.data(), target.data(), pred.data(), dpred.data(), loss.data(),
                       partials.data(), partials.size(), batch, resident::nn::AdamWConfig{}};
  step.enqueue(ctx);
  ctx.synchronize();
  const float first = loss.download()[0];
  float norm = 0.0f;
  RESIDENT_CUDA_CHECK(
      cudaMemcpy(&norm, model->slab().grad_norm(), sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("one train step at batch 256: loss %.6f, gradient norm %.6f\n", first, norm);
  EXPECT_TRUE(std::isfinite(first));
  EXPECT_TRUE(std::isfinite(norm));
  EXPECT_GT(norm, 0.0f);

  cudaGraph_t graph = nullptr;
  RESIDENT_CUDA_CHECK(cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeThreadLocal));
  step.enqueue(ctx);
  RESIDENT_CUDA_CHECK(cudaStreamEndCapture(ctx.stream(), &graph));
  cudaGraphExec_t exec = nullptr;
  RESIDENT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 10; ++i) RESIDENT_CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream()));
  cudaEvent_t start = nullptr, stop = nullptr;
  RESIDENT_CUDA_CHECK(cudaEventCreate(&start));
  RESIDENT_CUDA_CHECK(cudaEventCreate(&stop));
  const int reps = 50;
  RESIDENT_CUDA_CHECK(cudaEventRecord(start, ctx.stream()));
  for (int i = 0; i < reps; ++i) RESIDENT_CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream()));
  RESIDENT_CUDA_CHECK(cudaEventRecord(stop, ctx.stream()));
  RESIDENT_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  RESIDENT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  std::printf("graph-replayed train step: %.4f ms (mean of %d; target <= 4 ms)\n", ms / reps,
              reps);
  EXPECT_TRUE(std::isfinite(loss.download()[0]));
  RESIDENT_CUDA_CHECK(cudaEventDestroy(start));
  RESIDENT_CUDA_CHECK(cudaEventDestroy(stop));
  RESIDENT_CUDA_CHECK(cudaGraphExecDestroy(exec));
  RESIDENT_CUDA_CHECK(cudaGraphDestroy(graph));
}

}  // namespace
