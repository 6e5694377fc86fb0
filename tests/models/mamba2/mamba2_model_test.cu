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

#include "kernels/core/error.h"
#include "kernels/nn/losses.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/models/mamba2/mamba2_model.h"
#include "lib/models/model_registry.h"
#include "tests/models/mamba2/mamba2_test_support.h"
#include "tests/reference/mamba2_reference.h"
#include "tests/support/gpu.h"

namespace {

namespace ref = resident::reference;
namespace tm = resident::test::mamba2;
using resident::DeviceBuffer;
using resident::StreamContext;
using resident::models::Mamba2Config;
using resident::models::Mamba2Model;
using resident::models::ModelShape;
using resident::nn::SlabPart;

constexpr double kRtol = 2e-3;
constexpr double kAtol = 2e-4;

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

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

DeviceBuffer<float> device_copy(const std::vector<float>& host) {
  DeviceBuffer<float> b(host.size());
  b.upload(host);
  return b;
}

// Uploads `params` into the model's slab (each tensor by name).
void upload_params(Mamba2Model& model, ref::Mamba2Params params, const StreamContext& ctx) {
  for (auto& [name, tensor] : ref::mamba2_named_tensors(params))
    model.slab().upload(SlabPart::Params, name, to_float(*tensor), ctx.stream());
}

// The model's parameters as the reference's (float -> double).
ref::Mamba2Params download_params(const Mamba2Model& model, const ref::Mamba2Dims& dims,
                                  const StreamContext& ctx) {
  const std::vector<float> flat = model.slab().download(SlabPart::Params, ctx.stream());
  ref::Mamba2Params p = ref::mamba2_zero_params(dims);
  for (auto& [name, tensor] : ref::mamba2_named_tensors(p)) {
    const std::size_t offset = model.slab().layout().tensor(name).offset;
    for (std::size_t i = 0; i < tensor->size(); ++i) (*tensor)[i] = flat[offset + i];
  }
  return p;
}

struct StepResult {
  std::vector<float> prediction;
  float loss = 0.0f;
  std::vector<float> grads_added;  // the whole grad slab minus its starting values
};

// forward -> MSE -> MSE backward -> backward on the GPU, the grads starting from `grads0`.
StepResult gpu_step(Mamba2Model& model, const StreamContext& ctx, const std::vector<float>& x,
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

// Grad-slab start values: random in the tensors, 0 in the padding (upload requires it).
std::vector<float> random_grads(const Mamba2Model& model, std::mt19937_64& rng) {
  std::vector<float> g(model.slab().total_elements(), 0.0f);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const auto& t : model.slab().layout().tensors())
    for (std::size_t i = 0; i < t.size; ++i) g[t.offset + i] = u(rng);
  return g;
}

// Compares one GPU step with the reference; returns the prediction for further checks.
StepResult check_against_reference(const Mamba2Config& config, const ModelShape& shape,
                                   std::size_t batch, bool random_parameters, std::uint64_t seed) {
  StreamContext ctx;
  Mamba2Model model(config, shape, seed);
  const ref::Mamba2Dims dims = reference_dims(config, shape);
  std::mt19937_64 rng(seed);
  if (random_parameters) upload_params(model, tm::random_params(dims, rng), ctx);
  const ref::Mamba2Params params = download_params(model, dims, ctx);
  const std::vector<double> x = tm::random_values(batch * shape.window * shape.features, -1, 1, rng);
  const std::vector<double> target = tm::random_values(batch * shape.outputs, -1, 1, rng);
  const std::vector<float> grads0 = random_grads(model, rng);
  const StepResult r = gpu_step(model, ctx, to_float(x), to_float(target), batch, grads0);

  const std::vector<double> pred = ref::mamba2_forward(dims, params, x, batch);
  const std::size_t n = pred.size();
  double loss = 0.0;
  std::vector<double> dpred(n);
  for (std::size_t i = 0; i < n; ++i) {
    loss += (pred[i] - target[i]) * (pred[i] - target[i]) / static_cast<double>(n);
    dpred[i] = 2.0 * (pred[i] - target[i]) / static_cast<double>(n);
  }
  ref::Mamba2Gradients g = ref::mamba2_backward(dims, params, x, batch, dpred);

  std::printf("%s, batch %zu, L %zu, chunk %zu, D %zu, layers %zu, headdim %zu, d_state %zu, "
              "%s parameters:\n",
              model.describe().c_str(), batch, shape.window, config.chunk, config.d_model,
              config.n_layers, config.headdim, config.d_state, random_parameters ? "random" : "init");
  const tm::Agreement pa = tm::agreement(r.prediction, pred, kRtol, kAtol);
  tm::print_agreement("prediction", pa, kRtol, kAtol);
  EXPECT_LE(pa.share, 1.0) << "prediction element " << pa.worst;
  const tm::Agreement la = tm::agreement(std::vector<float>{r.loss}, std::vector<double>{loss},
                                         kRtol, kAtol);
  tm::print_agreement("MSE loss", la, kRtol, kAtol);
  EXPECT_LE(la.share, 1.0);
  for (auto& [name, tensor] : ref::mamba2_named_tensors(g.params)) {
    const std::size_t offset = model.slab().layout().tensor(name).offset;
    const std::vector<float> got(r.grads_added.begin() + static_cast<std::ptrdiff_t>(offset),
                                 r.grads_added.begin() +
                                     static_cast<std::ptrdiff_t>(offset + tensor->size()));
    const tm::Agreement a = tm::agreement(got, *tensor, kRtol, kAtol);
    tm::print_agreement(name, a, kRtol, kAtol);
    EXPECT_LE(a.share, 1.0) << name << " element " << a.worst << ": gpu " << got[a.worst]
                            << ", reference " << (*tensor)[a.worst];
  }
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
  const StepResult chunked = check_against_reference(c, shape, 5, true, 76);
  c.chunk = 128;
  const StepResult single = check_against_reference(c, shape, 5, true, 76);
  // Same parameters, inputs and starting grads (same seed): the two differ by fp32 rounding.
  const double rtol = 1e-4, atol = 1e-5;
  const tm::Agreement pa = tm::agreement(chunked.prediction, single.prediction, rtol, atol);
  tm::print_agreement("chunk 64 vs 128: prediction", pa, rtol, atol);
  EXPECT_LE(pa.share, 1.0);
  const tm::Agreement ga = tm::agreement(chunked.grads_added, single.grads_added, rtol, atol);
  tm::print_agreement("chunk 64 vs 128: every gradient", ga, rtol, atol);
  EXPECT_LE(ga.share, 1.0) << "slab element " << ga.worst;
}

struct TrainStep {
  Mamba2Model* model;
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

TEST(Mamba2Model, GraphReplayEqualsEagerBitForBit) {
  RESIDENT_REQUIRE_GPU();
  const ModelShape shape{64, 32, 1, 96};
  const std::size_t batch = 96;
  StreamContext ctx;
  Mamba2Model eager(Mamba2Config{}, shape, 81), graphed(Mamba2Config{}, shape, 81);
  std::mt19937_64 rng(82);
  DeviceBuffer<float> x = device_copy(to_float(tm::random_values(batch * 64 * 32, -1, 1, rng)));
  DeviceBuffer<float> target = device_copy(to_float(tm::random_values(batch, -1, 1, rng)));
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
  const std::vector<float> init = Mamba2Model(Mamba2Config{}, shape, 81)
                                      .slab()
                                      .download(SlabPart::Params, ctx.stream());
  ASSERT_EQ(pa.size(), pb.size());
  EXPECT_EQ(std::memcmp(pa.data(), pb.data(), pa.size() * sizeof(float)), 0)
      << "graph replay and eager steps differ";
  EXPECT_NE(std::memcmp(pa.data(), init.data(), pa.size() * sizeof(float)), 0)
      << "the steps did not change the parameters";
  EXPECT_EQ(eager.slab().read_step(ctx.stream()), 3u);
  EXPECT_EQ(graphed.slab().read_step(ctx.stream()), 3u);
  std::printf("3 eager steps and 3 graph replays: %zu parameters equal bit for bit\n", pa.size());
}

TEST(Mamba2Model, BenchmarkShapeTrainStep) {
  RESIDENT_REQUIRE_GPU();
  const ModelShape shape{64, 32, 1, 256};
  const std::size_t batch = 256;
  StreamContext ctx;
  const auto made = resident::models::make_supervised_model("mamba2", shape, 91);
  auto* model = dynamic_cast<Mamba2Model*>(made.get());
  ASSERT_NE(model, nullptr);
  std::printf("%s\n", model->describe().c_str());
  std::mt19937_64 rng(92);
  DeviceBuffer<float> x = device_copy(to_float(tm::random_values(batch * 64 * 32, -1, 1, rng)));
  DeviceBuffer<float> target = device_copy(to_float(tm::random_values(batch, -1, 1, rng)));
  DeviceBuffer<float> pred(batch), dpred(batch), loss(1);
  DeviceBuffer<float> partials(resident::kernels::loss_partials_count(batch));
  const TrainStep step{model, x.data(), target.data(), pred.data(), dpred.data(), loss.data(),
                       partials.data(), partials.size(), batch, resident::nn::AdamWConfig{}};
  step.enqueue(ctx);
  ctx.synchronize();
  const float first = loss.download()[0];
  const float norm = [&] {
    float v = 0.0f;
    RESIDENT_CUDA_CHECK(
        cudaMemcpy(&v, model->slab().grad_norm(), sizeof(float), cudaMemcpyDeviceToHost));
    return v;
  }();
  std::printf("one train step at batch 256: loss %.6f, gradient norm %.6f\n", first, norm);
  EXPECT_TRUE(std::isfinite(first));
  EXPECT_TRUE(std::isfinite(norm));
  EXPECT_GT(norm, 0.0f);

  // Graph-replayed step time (for information; the lead's benchmark is the record).
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
  const int reps = 100;
  RESIDENT_CUDA_CHECK(cudaEventRecord(start, ctx.stream()));
  for (int i = 0; i < reps; ++i) RESIDENT_CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream()));
  RESIDENT_CUDA_CHECK(cudaEventRecord(stop, ctx.stream()));
  RESIDENT_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  RESIDENT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  std::printf("graph-replayed train step: %.4f ms (mean of %d; target <= 0.6 ms)\n", ms / reps,
              reps);
  const float later = loss.download()[0];
  EXPECT_TRUE(std::isfinite(later));
  RESIDENT_CUDA_CHECK(cudaEventDestroy(start));
  RESIDENT_CUDA_CHECK(cudaEventDestroy(stop));
  RESIDENT_CUDA_CHECK(cudaGraphExecDestroy(exec));
  RESIDENT_CUDA_CHECK(cudaGraphDestroy(graph));
}

}  // namespace
