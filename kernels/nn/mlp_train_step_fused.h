// The whole supervised train step of an MLP in one cooperative (grid-synchronized) kernel
// (kernels/nn/mlp_train_step_fused.cu): forward, MSE loss and its gradient, backward, global-norm
// clip and AdamW over the slab. The GEMM path of nn::Mlp + RegressionStep is ~24 launches of
// 2-7 us each for the 256 x (64-256-256-3) step; this is one launch whose phases are separated by
// grid barriers (layers - 1 forward phases, the output head, layers - 1 backward phases, the
// optimizer: 2 * layers - 1 barriers).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/nn/activation.h"
#include "kernels/nn/adamw.h"

namespace resident::kernels {

inline constexpr std::size_t kFusedStepMaxLayers = 4;
inline constexpr std::size_t kFusedStepMaxOut = 32;  // outputs of the last layer

// The MLP: layer l (0-based) maps widths[l] -> widths[l + 1]; weight [out, in] row-major and
// bias [out] (the slab's params); hidden layers apply `hidden_activation`, the last none.
struct FusedStepMlp {
  std::size_t layers = 0;
  std::size_t widths[kFusedStepMaxLayers + 1] = {};
  const float* weights[kFusedStepMaxLayers] = {};
  const float* biases[kFusedStepMaxLayers] = {};
  float* weight_grads[kFusedStepMaxLayers] = {};  // overwritten
  float* bias_grads[kFusedStepMaxLayers] = {};    // overwritten
  Activation hidden_activation{};
};

// Device scratch of one step (the caller allocates it once; fused_step_scratch_* size it).
struct FusedStepScratch {
  float* pre_activations[kFusedStepMaxLayers - 1] = {};  // z_l [batch, widths[l + 1]], hidden l
  float* activations[kFusedStepMaxLayers - 1] = {};      // a_l = f(z_l), same shapes
  float* d_pre_activations[kFusedStepMaxLayers] = {};    // dL/dz_l [batch, widths[l + 1]], all l
  float* loss_partials = nullptr;   // [fused_step_loss_partials(batch)] (DQN: its own count)
  double* norm_partials = nullptr;  // [grid]: one per block
  // Split-K of the last backward phase's weight-gradient tiles (K = the batch rows), when the
  // grid has room for more than one block per tile (fused_step_phases.cuh, weight_grad_splits);
  // both null: off. split_partials [fused_step_split_partials(widths)] (transient);
  // split_counters [fused_step_split_tiles(widths)], zero before the first launch (the owner's
  // memset) and left zero by every launch.
  // Diagnostics (null: off): [2 * layers + 1] %globaltimer readings (ns) of block 0 at the start
  // and after each grid barrier and the optimizer phase: the phases' durations (each with the
  // barrier that ends it) are the differences.
  std::uint64_t* phase_times = nullptr;
  float* split_partials = nullptr;
  std::uint32_t* split_counters = nullptr;
};

// The most blocks one weight-gradient tile of the last backward phase is split over.
inline constexpr int kFusedStepMaxSplits = 4;

// The slab's optimizer state (nn::ParamSlab::optimizer_views()): params, grads, m, v [n] fp32
// (16-byte aligned; the grads the MLP's grad views point into), decay_mask [n] (4-byte aligned),
// and its device scalars.
struct FusedStepOptimizer {
  float* params = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  const float* grads = nullptr;
  const std::uint8_t* decay_mask = nullptr;
  std::size_t n = 0;
  std::uint64_t* step = nullptr;  // AdamW step counter: read, then += 1
  float* norm = nullptr;          // written: the global gradient norm
  float* grad_scale = nullptr;    // written: 1 (no scale pending after the step); may be null
  float max_norm = 1.0f;          // > 0 (+inf: never clips)
  AdamWConstants constants{};
};

// Whether the fused step takes an MLP of these widths ({in, hidden..., out}): 2 to 4 layers, every
// width >= 1, the output width <= kFusedStepMaxOut. Any batch >= 1 is correct; it is fast while the
// batch is small (a weight gradient's K is the batch, summed by one block per 32 x 32 tile).
bool fused_step_supports(std::span<const std::size_t> widths) noexcept;

// Whether the current device runs the fused kernels (this step, the fused DQN step and acting):
// they need cooperative launches. Host-side device queries only; callers fall back to the GEMM
// path when it is false.
bool fused_step_device_ok();

// The split-K scratch of FusedStepScratch for an MLP of these widths ({in, hidden..., out}):
// counters (the last backward phase's weight-gradient tiles: dW_1's and dW_L's 32 x 32 tiles) and
// floats of partials (kFusedStepMaxSplits - 1 per tile, 32 x 32 + 32 floats each).
std::size_t fused_step_split_tiles(std::span<const std::size_t> widths) noexcept;
std::size_t fused_step_split_partials(std::span<const std::size_t> widths) noexcept;

// Floats of the loss partials for `batch` rows (one per 8-row tile of the output head) of this
// step; the fused DQN step's: dqn_fused_step_loss_partials (kernels/rl/dqn/dqn_train_step_fused.h).
std::size_t fused_step_loss_partials(std::size_t batch) noexcept;

// The grid a launch uses: as many blocks as the largest phase has tiles, at most as many as are
// co-resident on the current device (a cooperative launch requires it). Host-side device queries
// only (no stream work): call it at setup. Throws resident::Error when the device cannot launch
// cooperative kernels or for unsupported widths.
unsigned fused_step_grid(std::span<const std::size_t> widths, std::size_t batch,
                         const Activation& hidden_activation);

// Checks the network views of a fused kernel: 2 to 4 layers, fused_step_supports(widths), every
// weight and bias (and, with_grads, every gradient) view and every hidden layer's z and a scratch
// non-null; throws resident::Error naming `op`, the value and the limit. Shared by the fused
// steps' and the fused DQN acting kernel's launchers.
void check_fused_network(const char* op, const FusedStepMlp& mlp, const FusedStepScratch& scratch,
                         bool with_grads);

// Checks the views a fused step launch uses (the MLP's and the optimizer's; the output width at
// most kFusedStepMaxOut, 2 to 4 layers, batch 1 to 2^24, grid > 0, alignment, max_norm > 0) and
// throws resident::Error naming `op`, the value and the limit. Shared by the fused steps'
// launchers (this one and kernels/rl/dqn/dqn_train_step_fused.h).
void check_fused_step_views(const char* op, const FusedStepMlp& mlp,
                            const FusedStepScratch& scratch, const FusedStepOptimizer& optimizer,
                            std::size_t batch, unsigned grid);

// One train step on x [batch, in] and target [batch, out], in the order
//   z_l = a_{l-1} W_l^T + b_l, a_l = f(z_l) (a_0 = x; the last layer's y = z_L has no f)
//   loss = sum (y - target)^2 / (batch * out)              (written to *loss)
//   dy = 2 (y - target) / (batch * out)
//   dz_{l-1} = (dz_l W_l) * f'(z_{l-1});  dW_l = dz_l^T a_{l-1};  db_l = column sums of dz_l
//   norm = sqrt(sum of every gradient squared) (fp64), s = 1 if norm <= max_norm else
//   max_norm / norm; AdamW (kernels/nn/adamw.h's update, lr schedule and step counter) with the
//   gradients times s over the whole slab; *norm, *step += 1 and *grad_scale = 1 written.
// Grads are overwritten (every element of every weight and bias gradient is written once); slab
// elements outside the MLP's tensors must have zero grads (the slab's padding does). Results equal
// the GEMM path to rounding: each output is one thread's fp32 sum in a fixed order (with split
// scratch, the last backward phase's weight gradients the sum of their parts in part order),
// reductions (bias gradients, the loss, the norm's fp64 partials) run in a fixed order:
// bit-for-bit reproducible for a given grid and scratch. Graph-capturable (a kernel node with the cooperative attribute);
// no allocation, no host synchronization. `grid` from fused_step_grid for the same arguments.
// Throws resident::Error naming the value and the limit on invalid arguments.
void launch_mlp_train_step_fused(float* loss, const FusedStepMlp& mlp,
                                 const FusedStepScratch& scratch,
                                 const FusedStepOptimizer& optimizer, const float* x,
                                 const float* target, std::size_t batch, unsigned grid,
                                 cudaStream_t stream);

}  // namespace resident::kernels
