// Fused backward of a narrow MLP (kernels/nn/mlp_backward_fused.cu): the weight and bias
// gradients of every layer from one pass over the rows, instead of per layer a weight-gradient
// GEMM (+ split-K reduce), an input-gradient GEMM and an activation backward + bias gradient.
// Used by nn::Mlp for the PPO actor/critic (4-64-64-A): ~12 launches become 2.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>

#include "kernels/nn/activation.h"
#include "kernels/nn/mlp_forward_fused.h"
#include "kernels/core/grad_mode.h"

namespace resident::kernels {

inline constexpr std::size_t kFusedBackwardMaxWidth = 64;

// Where the gradients go (the slab's views), per layer: dW_l [out, in] row-major, db_l [out].
struct FusedMlpGrads {
  float* weight[kFusedMlpMaxLayers] = {};
  float* bias[kFusedMlpMaxLayers] = {};
};

// Whether launch_fused_mlp_backward takes an MLP of these widths ({in, hidden..., out}): 1 to 4
// layers, every width in [1, 64], hidden widths multiples of 4, weight-gradient blocks that fit
// the kernel's per-thread accumulators and 48 KB of shared memory (the PPO nets 4-64-64-A do;
// 64-64-64-64-64 does not).
bool fused_mlp_backward_supports(std::span<const std::size_t> widths) noexcept;

// Floats of scratch a launch for `rows` rows needs: min(ceil(rows / 32), 384) blocks x the
// MLP's parameters (no device query: a CPU-side plan may size it). Throws for unsupported widths.
std::size_t fused_mlp_backward_scratch_floats(std::span<const std::size_t> widths,
                                              std::size_t rows);

// The gradients of a forward made by launch_fused_mlp_forward(mlp, x, rows, hidden), given
// dy = dL/dz of the last layer [rows, out]:
//   dz_{L-1} = dy;  dz_{l-1} = (dz_l W_l) * f'(a_{l-1})   (f' from the saved outputs a_{l-1},
//                                                         SavedActivation::Output arithmetic)
//   dW_l = dz_l^T a_{l-1} (a_{-1} = x),  db_l = column sums of dz_l
// written to `grads` (overwrite, or added with GradMode::Accumulate). mlp.layer[l].activation
// must hold a_l of that forward (hidden layers); weights and biases as in the forward. hidden
// must be ReLU or tanh (derivative_from_output_exact). x is not differentiated (no dx).
// Each block walks 32-row tiles with the weights in shared memory and accumulates a fixed share
// of dW/db in registers over its rows in order; it writes them to scratch [blocks, parameters],
// and a second kernel adds the blocks' rows in block order: deterministic (the order depends on
// rows alone), not the GEMM path's order (results agree to rounding). scratch must hold
// fused_mlp_backward_scratch_floats(widths, rows) floats. Throws resident::Error naming the field
// for unsupported widths, a non-ReLU/tanh activation, null pointers or a short scratch. No
// allocation; graph-capturable.
void launch_fused_mlp_backward(const FusedMlp& mlp, const float* x, const float* dy,
                               std::size_t rows, const Activation& hidden,
                               const FusedMlpGrads& grads, nn::GradMode mode, float* scratch,
                               std::size_t scratch_floats, cudaStream_t stream);

}  // namespace resident::kernels
