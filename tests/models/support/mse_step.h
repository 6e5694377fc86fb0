// The MSE-trained models' GPU harness (CfC, xLSTM, Mamba2: forward -> MSE -> MSE backward ->
// backward), shared so each model test keeps only its config, reference calls and tolerances.
// Contracts:
//   - gpu_mse_step: poisoned_step.h's run_poisoned_step with the trainer's MSE loss and its
//     gradient (GradMode::Overwrite) as the loss: prediction and dprediction NaN before the run,
//     the grads starting from grads0 (random values: the backward must ADD exactly its share).
//     Returns the prediction, the loss and grads_added = the grad slab minus grads0.
//   - reference_mse: the double MSE of pred against target and its gradient 2 (pred - target) / n.
//   - expect_mse_step_agrees: prints and checks "prediction" and "MSE loss" against the reference
//     (agreement.h; share <= 1).
//   - MseTrainStep::enqueue: the trainer's whole step on ctx's stream, in its order: zero_grads,
//     forward, MSE, MSE backward, backward, clip_and_adamw_step(max norm 1); enqueues only, so it
//     can be captured in a CUDA graph.
//   - MseStepBuffers: device inputs x (x_count values U(-1, 1), drawn first) and targets (n values
//     U(-1, 1), drawn second) from rng, and the step's prediction, dprediction, loss and partials
//     buffers for n outputs.
//   - read_grad_norm: the slab's last computed gradient norm (a blocking copy).
//   - expect_mse_graph_replay_equals_eager<Model>(batch, args...): "graph replay equals eager bit
//     for bit" for an MSE model built as Model(args...): two models built alike (same init);
//     inputs U(-1, 1) [batch, L, F] and targets U(-1, 1) [batch, outputs] from mt19937_64(82);
//     AdamW with weight decay 0.01; 3 eager steps of one against 3 replays of the other's captured
//     step (graph_step.h: parameters equal bit for bit and moved from a third Model(args...)'s),
//     both step counters at 3. Returns the number of parameters compared (0 after a size
//     mismatch, which fails and skips the counters) and the eager model's describe().
//   - expect_mse_benchmark_step(model, batch, seed, reps): one MSE step at the model's shape
//     (inputs and targets U(-1, 1) from mt19937_64(seed)), printing "one train step at batch B:
//     loss .., gradient norm .." and expecting both finite and the norm > 0; then 10 warm-up
//     replays of the captured step and `reps` timed ones (CUDA events), the loss still finite.
//     Returns the mean replay time in ms (the caller prints it with its target).
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/nn/losses.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/models/supervised_model.h"
#include "lib/nn/param_slab.h"
#include "tests/models/support/agreement.h"
#include "tests/models/support/graph_step.h"
#include "tests/models/support/harness_values.h"
#include "tests/models/support/poisoned_step.h"

namespace resident::test {

struct MseStepResult {
  std::vector<float> prediction;
  float loss = 0.0f;
  std::vector<float> grads_added;  // the whole grad slab minus its starting values
};

inline MseStepResult gpu_mse_step(models::SupervisedModel& model, const StreamContext& ctx,
                                  const std::vector<float>& x, const std::vector<float>& target,
                                  std::size_t batch, const std::vector<float>& grads0) {
  const std::size_t n = batch * model.shape().outputs;
  DeviceBuffer<float> dx = device_copy(x), dtarget = device_copy(target);
  DeviceBuffer<float> pred(n), dpred(n), loss(1);
  DeviceBuffer<float> partials(kernels::loss_partials_count(n));
  MseStepResult r;
  r.grads_added = run_poisoned_step(model, ctx, dx.data(), batch, pred, dpred, grads0, [&] {
    kernels::launch_mse_loss(loss.data(), partials.data(), partials.size(), pred.data(),
                             dtarget.data(), n, ctx.stream());
    kernels::launch_mse_loss_backward(dpred.data(), pred.data(), dtarget.data(), n, 1.0f,
                                      nn::GradMode::Overwrite, ctx.stream());
  });
  r.prediction = pred.download();
  r.loss = loss.download()[0];
  return r;
}

struct MseReference {
  double loss = 0.0;
  std::vector<double> dpred;
};

inline MseReference reference_mse(const std::vector<double>& pred,
                                  const std::vector<double>& target) {
  const std::size_t n = pred.size();
  MseReference r;
  r.dpred.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    r.loss += (pred[i] - target[i]) * (pred[i] - target[i]) / static_cast<double>(n);
    r.dpred[i] = 2.0 * (pred[i] - target[i]) / static_cast<double>(n);
  }
  return r;
}

inline void expect_mse_step_agrees(const MseStepResult& r, const std::vector<double>& pred,
                                   double loss, double rtol, double atol, int width) {
  const Agreement pa = agreement(r.prediction, pred, rtol, atol);
  print_agreement("prediction", pa, rtol, atol, width);
  EXPECT_LE(pa.share, 1.0) << "prediction element " << pa.worst;
  const Agreement la =
      agreement(std::vector<float>{r.loss}, std::vector<double>{loss}, rtol, atol);
  print_agreement("MSE loss", la, rtol, atol, width);
  EXPECT_LE(la.share, 1.0);
}

struct MseTrainStep {
  models::SupervisedModel* model;
  const float* x;
  const float* target;
  float* pred;
  float* dpred;
  float* loss;
  float* partials;
  std::size_t partials_count;
  std::size_t batch;
  nn::AdamWConfig adamw;

  void enqueue(const StreamContext& ctx) const {
    const std::size_t n = batch * model->shape().outputs;
    model->slab().zero_grads(ctx.stream());
    model->forward(ctx, x, batch, pred);
    kernels::launch_mse_loss(loss, partials, partials_count, pred, target, n, ctx.stream());
    kernels::launch_mse_loss_backward(dpred, pred, target, n, 1.0f, nn::GradMode::Overwrite,
                                      ctx.stream());
    model->backward(ctx, x, dpred, batch);
    model->slab().clip_and_adamw_step(1.0f, adamw, ctx.stream());
  }
};

struct MseStepBuffers {
  DeviceBuffer<float> x, target, pred, dpred, loss, partials;

  MseStepBuffers(std::size_t x_count, std::size_t n, std::mt19937_64& rng)
      : x(device_copy(to_float(random_values(x_count, -1, 1, rng)))),
        target(device_copy(to_float(random_values(n, -1, 1, rng)))),
        pred(n),
        dpred(n),
        loss(1),
        partials(kernels::loss_partials_count(n)) {}

  MseTrainStep step(models::SupervisedModel* model, std::size_t batch,
                    const nn::AdamWConfig& adamw) {
    return {model,       x.data(),        target.data(),   pred.data(), dpred.data(),
            loss.data(), partials.data(), partials.size(), batch,       adamw};
  }
};

inline float read_grad_norm(const nn::ParamSlab& slab) {
  float v = 0.0f;
  RESIDENT_CUDA_CHECK(cudaMemcpy(&v, slab.grad_norm(), sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}

struct ReplayComparison {
  std::size_t compared = 0;  // parameters compared; 0 after a size mismatch
  std::string description;   // the eager model's describe()
};

template <class Model, class... Args>
ReplayComparison expect_mse_graph_replay_equals_eager(std::size_t batch, const Args&... args) {
  StreamContext ctx;
  Model eager(args...), graphed(args...);
  const models::ModelShape& shape = eager.shape();
  std::mt19937_64 rng(82);
  MseStepBuffers buffers(batch * shape.window * shape.features, batch * shape.outputs, rng);
  nn::AdamWConfig adamw;
  adamw.weight_decay = 0.01;
  const MseTrainStep a = buffers.step(&eager, batch, adamw);
  MseTrainStep b = a;
  b.model = &graphed;
  run_eager_then_replayed(ctx, 3, [&] { a.enqueue(ctx); }, [&] { b.enqueue(ctx); });
  ReplayComparison r;
  r.description = eager.describe();
  r.compared =
      expect_replay_equals_eager(eager.slab(), graphed.slab(), Model(args...).slab(), ctx.stream());
  if (r.compared == 0) return r;
  EXPECT_EQ(eager.slab().read_step(ctx.stream()), 3u);
  EXPECT_EQ(graphed.slab().read_step(ctx.stream()), 3u);
  return r;
}

inline float expect_mse_benchmark_step(models::SupervisedModel& model, std::size_t batch,
                                       std::uint64_t seed, int reps) {
  const models::ModelShape& shape = model.shape();
  StreamContext ctx;
  std::mt19937_64 rng(seed);
  MseStepBuffers buffers(batch * shape.window * shape.features, batch * shape.outputs, rng);
  const MseTrainStep step = buffers.step(&model, batch, nn::AdamWConfig{});
  step.enqueue(ctx);
  ctx.synchronize();
  const float first = buffers.loss.download()[0];
  const float norm = read_grad_norm(model.slab());
  std::printf("one train step at batch %zu: loss %.6f, gradient norm %.6f\n", batch, first, norm);
  EXPECT_TRUE(std::isfinite(first));
  EXPECT_TRUE(std::isfinite(norm));
  EXPECT_GT(norm, 0.0f);

  const StepGraph graph(ctx.stream(), cudaStreamCaptureModeThreadLocal,
                        [&] { step.enqueue(ctx); });
  for (int i = 0; i < 10; ++i) graph.launch(ctx.stream());
  const float ms = mean_event_ms(ctx.stream(), reps, [&] { graph.launch(ctx.stream()); });
  EXPECT_TRUE(std::isfinite(buffers.loss.download()[0]));
  return ms;
}

}  // namespace resident::test
