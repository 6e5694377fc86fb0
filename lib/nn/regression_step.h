// RegressionStep: one supervised train step of an Mlp on an MSE loss, everything on the device:
//   zero grads -> forward -> MSE loss (device scalar) -> dLoss/dy -> backward -> global-norm
//   clip and fused AdamW (ParamSlab::clip_and_adamw_step: two kernels).
// Shortcuts: fused_mse_loss (default on) computes the loss and dLoss/dy in one launch
// (kernels/nn/mse_loss_fused.h; same loss bits, same gradient formula); when the slab holds the
// Mlp's tensors alone, the backward overwrites the grads (GradMode::Overwrite: every grad is
// written exactly once; with CublasLt it also lets the bias gradients fuse into the GEMMs) and
// the zeroing memset is skipped (the slab's padding stays 0 from finalize()).
// fused_step (default on) runs the whole step as one cooperative kernel
// (kernels/nn/mlp_train_step_fused.h: ~24 launches become 1) when it applies: the cuBLAS backend,
// biases, 2 to 4 layers, at most 32 outputs, a batch of at most kFusedStepMaxBatch, grads
// overwritten (the slab holds the Mlp alone) and a device that launches cooperative kernels. Its
// results equal the GEMM path's to rounding; it writes its own scratch (owned here), not the
// Mlp's arena, so the Mlp's saved activations are not those of the step.
// No allocation, no copy, no host synchronization: the whole step is capturable into a CUDA
// graph (capture()), and the loss stays on the device until a ScalarReadback reads it.
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "kernels/nn/mlp_train_step_fused.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/nn/mlp.h"
#include "lib/nn/param_slab.h"

namespace resident::nn {

struct RegressionStepConfig {
  AdamWConfig adamw{};
  float max_grad_norm = 1.0f;
  bool fused_mse_loss = true;  // one launch for the loss and its gradient (false: three)
  bool fused_step = true;      // the whole step as one kernel where it applies (see above)
};

// Largest batch the fused step is used for: a weight gradient sums the batch in one block per
// 32 x 32 tile, so large batches (the 4096-row bench shape) stay on the GEMM path. Measured at
// 256 rows only (38 vs 104 us); the crossover batch is unmeasured.
inline constexpr std::size_t kFusedStepMaxBatch = 1024;

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
  // True when run() overwrites the grads instead of zeroing them and accumulating.
  bool overwrites_grads() const noexcept { return overwrite_grads_; }
  // True when run() is the one-kernel fused step.
  bool fused() const noexcept { return fused_grid_ != 0; }
  // Diagnostics of the fused step: where it writes its phase clock readings
  // (FusedStepScratch::phase_times, [2 * layers + 1] device values; null: off). Before capture().
  void record_phase_times(std::uint64_t* device_times) noexcept {
    fused_scratch_.phase_times = device_times;
  }

 private:
  // True when the slab's tensors are exactly the Mlp's weights (and biases).
  static bool slab_holds_only(const Mlp& mlp, const ParamSlab& slab);

  Mlp& mlp_;
  ParamSlab& slab_;
  RegressionStepConfig config_;
  const float* x_;
  const float* target_;
  std::size_t batch_;
  DeviceBuffer<float> loss_, partials_, dy_;
  DeviceBuffer<unsigned int> loss_counter_;  // fused loss's ticket counter (0 between launches)
  bool overwrite_grads_ = false;
  // The fused step: its grid (0: not used), the kernel's views and its scratch.
  unsigned fused_grid_ = 0;
  void set_up_fused_step();
  std::vector<DeviceBuffer<float>> fused_buffers_;
  DeviceBuffer<double> fused_norm_partials_;
  DeviceBuffer<std::uint32_t> fused_split_counters_;  // split-K of the last backward phase
  kernels::FusedStepMlp fused_mlp_;
  kernels::FusedStepScratch fused_scratch_;
  kernels::FusedStepOptimizer fused_optimizer_;
  cudaGraphExec_t graph_ = nullptr;
};

}  // namespace resident::nn
