// The MSE-trained models' GPU harness (CfC, xLSTM, Mamba2: forward -> MSE -> MSE backward ->
// backward), shared so each model test keeps only its config, reference calls and tolerances.
// Contracts:
//   - gpu_mse_step: one forward, the trainer's MSE loss and its gradient (GradMode::Overwrite),
//     and one backward on ctx's stream, synchronized. Before the run the prediction and
//     dprediction buffers are poisoned with NaN (all bits set) and the grads are set to grads0
//     (random values: the backward must ADD exactly its share). Returns the prediction, the loss
//     and grads_added = the whole grad slab after the backward minus grads0.
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
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <random>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/nn/losses.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/models/supervised_model.h"
#include "lib/nn/param_slab.h"
#include "tests/models/support/agreement.h"
#include "tests/models/support/harness_values.h"

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
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(pred.data(), 0xFF, pred.bytes(), ctx.stream()));  // NaN
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(dpred.data(), 0xFF, dpred.bytes(), ctx.stream()));
  model.slab().upload(nn::SlabPart::Grads, grads0, ctx.stream());
  model.forward(ctx, dx.data(), batch, pred.data());
  kernels::launch_mse_loss(loss.data(), partials.data(), partials.size(), pred.data(),
                           dtarget.data(), n, ctx.stream());
  kernels::launch_mse_loss_backward(dpred.data(), pred.data(), dtarget.data(), n, 1.0f,
                                    nn::GradMode::Overwrite, ctx.stream());
  model.backward(ctx, dx.data(), dpred.data(), batch);
  ctx.synchronize();
  MseStepResult r;
  r.prediction = pred.download();
  r.loss = loss.download()[0];
  r.grads_added = model.slab().download(nn::SlabPart::Grads, ctx.stream());
  for (std::size_t i = 0; i < r.grads_added.size(); ++i) r.grads_added[i] -= grads0[i];
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

}  // namespace resident::test
