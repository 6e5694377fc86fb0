// Fused forward of a narrow MLP (kernels/nn/mlp_forward_fused.cu): every layer of a row tile in
// one launch, instead of a GEMM, a bias-activation and a bias kernel per layer. Used by nn::Mlp
// when every width is <= kFusedMlpMaxWidth and the weights and tiles fit in the default 48 KiB
// of shared memory (the PPO actor/critic 4-64-64-A: 6 launches become 1). Wider MLPs (up to
// the device's opt-in limit) are supported by the kernel; the DQN Q-network (64-128-128-3)
// measured slower this way than on the GEMM path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>

#include "kernels/nn/activation.h"

namespace resident::kernels {

inline constexpr std::size_t kFusedMlpMaxWidth = 128;
inline constexpr std::size_t kFusedMlpMaxLayers = 4;

struct FusedMlpLayer {
  const float* weight = nullptr;     // W [out, in] row-major
  const float* bias = nullptr;       // b [out]
  float* pre_activation = nullptr;   // z [rows, out], overwritten; optional for hidden layers
  float* activation = nullptr;       // a = f(z) [rows, out], overwritten; hidden layers only
};

struct FusedMlp {
  unsigned layers = 0;                                  // in [1, kFusedMlpMaxLayers]
  unsigned widths[kFusedMlpMaxLayers + 1] = {};         // {in, hidden..., out}, each in [1, 128]
  FusedMlpLayer layer[kFusedMlpMaxLayers] = {};
};

// Whether launch_fused_mlp_forward takes an MLP of these widths ({in, ..., out}) by shape (the
// shared-memory size is checked apart: fused_mlp_forward_shared_bytes against the limit).
bool fused_mlp_forward_supports(std::span<const std::size_t> widths) noexcept;

// Dynamic shared memory of a launch for these widths (throws for unsupported widths), and the
// device's per-block opt-in limit (queried once). Above 48 KB the launcher opts in; ncu cannot
// replay a graph node that did (it fails with LaunchFailed), so profile PPO-sized MLPs.
std::size_t fused_mlp_forward_shared_bytes(std::span<const std::size_t> widths);
std::size_t fused_mlp_forward_shared_limit();

// For each layer l in order: z_l[r, j] = (sum over k = 0..in-1, in order, of fmaf(in[r, k],
// W_l[j, k])) + b_l[j], where in = x for l = 0 and a_{l-1} otherwise; hidden layers also write
// a_l = f(z_l) with f = `hidden` (the last layer has no activation and no `activation` output);
// a hidden layer's z is not written when its pre_activation is null (its backward then derives
// f' from a: SavedActivation::Output in bias_activation.h).
// x [rows, widths[0]]. A block holds every layer's weights (transposed) in shared memory and
// walks 32-row tiles (256 or 128 threads; at most 4 blocks per multiprocessor; the tile's
// activations also in shared memory); z and a are each written once, the weights read once per
// block. Deterministic (fixed order per output; no atomics); the order differs from cuBLAS's, so
// results match the unfused path to rounding, not bit for bit. Outputs must not alias x, the
// weights or one another; z/a of a layer whose width is a multiple of 4 must be 16-byte aligned
// (they are written as float4). Throws resident::Error naming the field for bad widths, layer
// counts, null pointers, misalignment or weights beyond the shared-memory limit. No allocation;
// graph-capturable.
void launch_fused_mlp_forward(const FusedMlp& mlp, const float* x, std::size_t rows,
                              const Activation& hidden, cudaStream_t stream);

}  // namespace resident::kernels
