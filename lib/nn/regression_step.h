// RegressionStep: one supervised train step of an Mlp on an MSE loss, everything on the device:
//   zero grads -> forward -> MSE loss (device scalar) -> dLoss/dy -> backward -> global-norm
//   clip -> fused AdamW.
// No allocation, no copy, no host synchronization: the whole step is capturable into a CUDA
// graph (capture()), and the loss stays on the device until a ScalarReadback reads it.
#pragma once

#include <cuda_runtime_api.h>

#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/nn/mlp.h"
#include "lib/nn/param_slab.h"

namespace resident::nn {

struct RegressionStepConfig {
  AdamWConfig adamw{};
  float max_grad_norm = 1.0f;
};

class RegressionStep {
 public:
  // x [batch, in] and target [batch, out] stay owned by the caller and must outlive the step.
  RegressionStep(Mlp& mlp, ParamSlab& slab, RegressionStepConfig config, const float* x,
                 const float* target, std::size_t batch);
  ~RegressionStep();
  RegressionStep(const RegressionStep&) = delete;
  RegressionStep& operator=(const RegressionStep&) = delete;

  // Enqueues one step on the context's stream.
  void run(const StreamContext& context);
  // Captures run() into a graph once; replay() launches it.
  void capture(const StreamContext& context);
  void replay(const StreamContext& context);

  const float* loss() const noexcept { return loss_.data(); }  // device scalar of the last step

 private:
  Mlp& mlp_;
  ParamSlab& slab_;
  RegressionStepConfig config_;
  const float* x_;
  const float* target_;
  std::size_t batch_;
  DeviceBuffer<float> loss_, partials_, dy_;
  cudaGraphExec_t graph_ = nullptr;
};

}  // namespace resident::nn
