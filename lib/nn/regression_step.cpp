#include "lib/nn/regression_step.h"

#include "kernels/nn/losses.h"
#include "kernels/nn/mlp_train_step_fused.h"
#include "kernels/nn/mse_loss_fused.h"
#include "kernels/core/error.h"
#include "lib/core/library_checks.h"

namespace resident::nn {

RegressionStep::RegressionStep(Mlp& mlp, ParamSlab& slab, RegressionStepConfig config,
                               const float* x, const float* target, std::size_t batch)
    : mlp_(mlp),
      slab_(slab),
      config_(config),
      x_(x),
      target_(target),
      batch_(batch),
      loss_(1),
      partials_(kernels::loss_partials_count(batch * mlp.out_features())),
      dy_(batch * mlp.out_features()),
      loss_counter_(config.fused_mse_loss ? 1 : 0) {
  if (config_.fused_mse_loss) {
    RESIDENT_CUDA_CHECK(cudaMemset(loss_counter_.data(), 0, loss_counter_.bytes()));  // setup
    RESIDENT_CUDA_CHECK(cudaDeviceSynchronize());
  }
  if (mlp_.config().backend == GemmBackend::CublasLt) mlp_.prepare_batch(batch_);
  overwrite_grads_ = slab_holds_only(mlp_, slab_);
  if (config_.fused_step) set_up_fused_step();
}

void RegressionStep::set_up_fused_step() {
  const MlpConfig& mc = mlp_.config();
  if (mc.backend != GemmBackend::Cublas || !mc.bias || !overwrite_grads_ ||
      batch_ > kFusedStepMaxBatch || !kernels::fused_step_supports(mc.widths))
    return;
  if (!kernels::fused_step_device_ok()) return;
  const std::size_t layers = mlp_.layers();
  fused_mlp_.layers = layers;
  fused_mlp_.hidden_activation = mc.hidden_activation;
  const auto scratch = [&](std::size_t floats) { return fused_buffers_.emplace_back(floats).data(); };
  for (std::size_t l = 0; l + 1 < layers; ++l) {  // z_l and a_l of the hidden layers
    fused_scratch_.pre_activations[l] = scratch(batch_ * mc.widths[l + 1]);
    fused_scratch_.activations[l] = scratch(batch_ * mc.widths[l + 1]);
  }
  for (std::size_t l = 0; l < layers; ++l) {
    fused_mlp_.widths[l] = mc.widths[l];
    fused_mlp_.weights[l] = slab_.param(mlp_.weight_name(l));
    fused_mlp_.biases[l] = slab_.param(mlp_.bias_name(l));
    fused_mlp_.weight_grads[l] = slab_.grad(mlp_.weight_name(l));
    fused_mlp_.bias_grads[l] = slab_.grad(mlp_.bias_name(l));
    fused_scratch_.d_pre_activations[l] = scratch(batch_ * mc.widths[l + 1]);
  }
  fused_mlp_.widths[layers] = mc.widths[layers];
  fused_scratch_.loss_partials = scratch(kernels::fused_step_loss_partials(batch_));
  const unsigned grid = kernels::fused_step_grid(mc.widths, batch_, mc.hidden_activation);
  fused_norm_partials_ = DeviceBuffer<double>(grid);
  fused_scratch_.norm_partials = fused_norm_partials_.data();
  // Split-K of the last backward phase: its counters start at zero and every step leaves them so.
  fused_scratch_.split_partials = scratch(kernels::fused_step_split_partials(mc.widths));
  fused_split_counters_ = DeviceBuffer<std::uint32_t>(kernels::fused_step_split_tiles(mc.widths));
  RESIDENT_CUDA_CHECK(cudaMemset(fused_split_counters_.data(), 0, fused_split_counters_.bytes()));
  fused_scratch_.split_counters = fused_split_counters_.data();
  const ParamSlab::OptimizerViews views = slab_.optimizer_views();
  fused_optimizer_ = {.params = views.params, .m = views.m, .v = views.v, .grads = views.grads,
                      .decay_mask = views.decay_mask, .n = views.n, .step = views.step,
                      .norm = views.grad_norm, .grad_scale = views.clip_scale,
                      .max_norm = config_.max_grad_norm,
                      .constants = adamw_constants(config_.adamw, "RegressionStep")};
  fused_grid_ = grid;
}

bool RegressionStep::slab_holds_only(const Mlp& mlp, const ParamSlab& slab) {
  std::size_t mlp_tensors = 0;
  for (std::size_t l = 0; l < mlp.layers(); ++l) {
    if (slab.layout().find(mlp.weight_name(l)) == nullptr) return false;
    ++mlp_tensors;
    if (mlp.config().bias) {
      if (slab.layout().find(mlp.bias_name(l)) == nullptr) return false;
      ++mlp_tensors;
    }
  }
  return slab.layout().tensors().size() == mlp_tensors;
}

RegressionStep::~RegressionStep() {
  if (graph_ != nullptr) (void)cudaGraphExecDestroy(graph_);
}

void RegressionStep::run(const StreamContext& context) {
  const cudaStream_t stream = context.stream();
  if (fused()) {
    kernels::launch_mlp_train_step_fused(loss_.data(), fused_mlp_, fused_scratch_,
                                         fused_optimizer_, x_, target_, batch_, fused_grid_,
                                         stream);
    return;
  }
  const std::size_t n = batch_ * mlp_.out_features();
  if (!overwrite_grads_) slab_.zero_grads(stream);
  const float* y = mlp_.forward(context, x_, batch_);
  if (config_.fused_mse_loss) {
    kernels::launch_mse_loss_fused(loss_.data(), dy_.data(), partials_.data(), partials_.size(),
                                   loss_counter_.data(), y, target_, n, 1.0f, GradMode::Overwrite,
                                   stream);
  } else {
    kernels::launch_mse_loss(loss_.data(), partials_.data(), partials_.size(), y, target_, n,
                             stream);
    kernels::launch_mse_loss_backward(dy_.data(), y, target_, n, 1.0f, GradMode::Overwrite, stream);
  }
  mlp_.backward(context, x_, dy_.data(), nullptr, batch_,
                overwrite_grads_ ? GradMode::Overwrite : GradMode::Accumulate);
  slab_.clip_and_adamw_step(config_.max_grad_norm, config_.adamw, stream);
}

void RegressionStep::capture(const StreamContext& context) {
  if (graph_ != nullptr) return;
  cudaGraph_t graph = nullptr;
  RESIDENT_CUDA_CHECK(cudaStreamBeginCapture(context.stream(), cudaStreamCaptureModeGlobal));
  try {
    run(context);
  } catch (...) {
    (void)cudaStreamEndCapture(context.stream(), &graph);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    throw;
  }
  RESIDENT_CUDA_CHECK(cudaStreamEndCapture(context.stream(), &graph));
  const cudaError_t instantiated = cudaGraphInstantiate(&graph_, graph, 0);
  (void)cudaGraphDestroy(graph);
  RESIDENT_CUDA_CHECK(instantiated);
}

void RegressionStep::replay(const StreamContext& context) {
  if (graph_ == nullptr)
    throw Error("RegressionStep::replay", "no graph", "call capture() first", __FILE__, __LINE__);
  RESIDENT_CUDA_CHECK(cudaGraphLaunch(graph_, context.stream()));
}

}  // namespace resident::nn
