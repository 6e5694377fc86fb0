// The sampler's residual block as one launch (kernels/models/diffusion/diffusion_fused_block.cu;
// block programs in diffusion_fused_block.cuh, which the CPU test runs on the host). Inference
// only (no saved activations, no gradients); DiffusionConfig::fused_sampler_blocks selects it in
// DiffusionModel::sample. For rows h [rows, D], in place:
//   ln = LayerNorm(h) (gamma, beta, eps; biased variance about the mean)
//   a  = silu((ln W1^T + b1) + temb)          temb: one row [D] (the step's time embedding)
//   h  = (h + a W2^T) + b2
// the unfused path's launch_layer_norm_forward, linear_forward (fc1, no bias),
// launch_diffusion_block_activation (temb_row_stride 0), linear_forward (fc2, no bias) and
// launch_diffusion_residual. W1, W2 are read transposed: wt [2 * blocks, D, D], matrix 2k = block
// k's fc1 W^T, 2k + 1 its fc2 W^T (wt[m][i][o] = W[o][i]), which launch_diffusion_fused_weights
// writes from the slab's [out, in] weights (once per sample() call, inside its graph).
// A CTA owns kFusedBlockRows rows (the last tile partial; rows past `rows` are neither read nor
// written) and all D columns; every sum runs in a fixed order (products: k ascending, fma from 0;
// LayerNorm: 32 strided partials, then in order), no atomics, so a graph replay equals an eager
// launch bit for bit. Nothing allocated or synchronized (capturable). D in [1, 1024]
// (kFusedBlockMaxWidth); larger throws resident::Error naming the value and the range. Call
// prepare_diffusion_fused_block_kernel() once, outside any capture, before the first launch (it
// raises the kernel's shared-memory limit: 64 KB at D = 1024).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::diffusion {

inline constexpr std::size_t kFusedBlockMaxWidth = 1024;
inline constexpr std::size_t kFusedBlockMaxMatrices = 32;  // 2 * kDiffusionMaxBlocks

void prepare_diffusion_fused_block_kernel();

// Throws resident::Error from `call` when width is outside [1, kFusedBlockMaxWidth].
void check_diffusion_fused_block_width(const char* call, std::size_t width);

// wt [matrices, D, D] (overwritten): wt[m][i][o] = w[m][o * D + i]. matrices in [1, 32]; wt must
// not alias any w[m].
void launch_diffusion_fused_weights(float* wt, const float* const* w, std::size_t matrices,
                                    std::size_t width, cudaStream_t stream);

// h [rows, D] in place (see above). w1t, w2t [D, D] (from launch_diffusion_fused_weights);
// gamma, beta, b1, b2, temb [D]. h must not alias the other inputs.
void launch_diffusion_fused_block(float* h, const float* gamma, const float* beta,
                                  const float* w1t, const float* b1, const float* temb,
                                  const float* w2t, const float* b2, std::size_t rows,
                                  std::size_t width, float eps, cudaStream_t stream);

}  // namespace resident::kernels::diffusion
