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

#include "kernels/core/error.h"
#include "kernels/nn/losses.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/models/model_registry.h"
#include "lib/models/xlstm/xlstm_model.h"
#include "tests/reference/xlstm_reference.h"
#include "tests/support/gpu.h"

namespace {

namespace ref = resident::reference;
using resident::DeviceBuffer;
using resident::StreamContext;
using resident::models::ModelShape;
using resident::models::XlstmConfig;
using resident::models::XlstmModel;
using resident::nn::SlabPart;

constexpr double kRtol = 3e-3;
constexpr double kAtol = 3e-4;

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

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

std::vector<double> random_values(std::size_t n, double low, double high, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(low, high);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

DeviceBuffer<float> device_copy(const std::vector<float>& host) {
  DeviceBuffer<float> b(host.size());
  b.upload(host);
  return b;
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

ref::XlstmParams download_params(const XlstmModel& model, const ref::XlstmDims& dims,
                                 const StreamContext& ctx) {
  const std::vector<float> flat = model.slab().download(SlabPart::Params, ctx.stream());
  ref::XlstmParams p = ref::xlstm_zero_params(dims);
  for (auto& [name, tensor] : p.tensors) {
    const std::size_t offset = model.slab().layout().tensor(name).offset;
    for (std::size_t i = 0; i < tensor.size(); ++i) tensor[i] = flat[offset + i];
  }
  return p;
}

std::vector<float> random_grads(const XlstmModel& model, std::mt19937_64& rng) {
  std::vector<float> g(model.slab().total_elements(), 0.0f);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const auto& t : model.slab().layout().tensors())
    for (std::size_t i = 0; i < t.size; ++i) g[t.offset + i] = u(rng);
  return g;
}

struct StepResult {
  std::vector<float> prediction;
  float loss = 0.0f;
  std::vector<float> grads_added;
};

StepResult gpu_step(XlstmModel& model, const StreamContext& ctx, const std::vector<float>& x,
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

// One GPU step against the reference.
StepResult check_against_reference(const XlstmConfig& config, const ModelShape& shape,
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
  const std::vector<float> grads0 = random_grads(model, rng);
  const StepResult r = gpu_step(model, ctx, xf, to_float(target), batch, grads0);
  const std::vector<double> pred = ref::xlstm_forward(dims, params, x, batch);
  const std::size_t n = pred.size();
  double loss = 0.0;
  std::vector<double> dpred(n);
  for (std::size_t i = 0; i < n; ++i) {
    loss += (pred[i] - target[i]) * (pred[i] - target[i]) / static_cast<double>(n);
    dpred[i] = 2.0 * (pred[i] - target[i]) / static_cast<double>(n);
  }
  const ref::XlstmGradients g = ref::xlstm_backward(dims, params, x, batch, dpred);
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
  for (const auto& [name, tensor] : g.params.tensors) {
    const std::size_t offset = model.slab().layout().tensor(name).offset;
    const std::vector<float> got(r.grads_added.begin() + static_cast<std::ptrdiff_t>(offset),
                                 r.grads_added.begin() +
                                     static_cast<std::ptrdiff_t>(offset + tensor.size()));
    const Agreement a = agreement(got, tensor, kRtol, kAtol);
    print_agreement(name, a);
    EXPECT_LE(a.share, 1.0) << name << " element " << a.worst << ": gpu " << got[a.worst]
                            << ", reference " << tensor[a.worst];
  }
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
  const StepResult r = check_against_reference(tiny(2, 1), ModelShape{24, 3, 2, 4}, 3, true, 77,
                                               80.0);
  for (const float v : r.prediction) EXPECT_TRUE(std::isfinite(v));
  for (const float g : r.grads_added) EXPECT_TRUE(std::isfinite(g));
}

struct TrainStep {
  XlstmModel* model;
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

void graph_equals_eager(const XlstmConfig& config) {
  const ModelShape shape{64, 32, 1, 96};
  const std::size_t batch = 96;
  StreamContext ctx;
  XlstmModel eager(shape, config, 81), graphed(shape, config, 81);
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
      XlstmModel(shape, config, 81).slab().download(SlabPart::Params, ctx.stream());
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
  DeviceBuffer<float> x = device_copy(to_float(random_values(batch * 64 * 32, -1, 1, rng)));
  DeviceBuffer<float> target = device_copy(to_float(random_values(batch, -1, 1, rng)));
  DeviceBuffer<float> pred(batch), dpred(batch), loss(1);
  DeviceBuffer<float> partials(resident::kernels::loss_partials_count(batch));
  const TrainStep step{model, x.data(), target.data(), pred.data(), dpred.data(), loss.data(),
                       partials.data(), partials.size(), batch, resident::nn::AdamWConfig{}};
  step.enqueue(ctx);
  cudaGraph_t graph = nullptr;
  RESIDENT_CUDA_CHECK(cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeThreadLocal));
  step.enqueue(ctx);
  RESIDENT_CUDA_CHECK(cudaStreamEndCapture(ctx.stream(), &graph));
  cudaGraphExec_t exec = nullptr;
  RESIDENT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) RESIDENT_CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream()));
  cudaEvent_t start = nullptr, stop = nullptr;
  RESIDENT_CUDA_CHECK(cudaEventCreate(&start));
  RESIDENT_CUDA_CHECK(cudaEventCreate(&stop));
  constexpr int kReps = 20;
  RESIDENT_CUDA_CHECK(cudaEventRecord(start, ctx.stream()));
  for (int i = 0; i < kReps; ++i) RESIDENT_CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream()));
  RESIDENT_CUDA_CHECK(cudaEventRecord(stop, ctx.stream()));
  RESIDENT_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  RESIDENT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  RESIDENT_CUDA_CHECK(cudaEventDestroy(start));
  RESIDENT_CUDA_CHECK(cudaEventDestroy(stop));
  RESIDENT_CUDA_CHECK(cudaGraphExecDestroy(exec));
  RESIDENT_CUDA_CHECK(cudaGraphDestroy(graph));
  const float l = loss.download()[0];
  std::printf("%s, batch 256, L 64, F 32: train step %.3f ms (graph-replayed, mean of %d), loss "
              "%.4f\n",
              model->describe().c_str(), ms / kReps, kReps, l);
  EXPECT_TRUE(std::isfinite(l));
}

}  // namespace
