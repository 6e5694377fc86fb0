#include "lib/nn/regression_step.h"

#include "kernels/nn/losses.h"
#include "kernels/nn/mse_loss_fused.h"
#include "lib/core/error.h"
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
