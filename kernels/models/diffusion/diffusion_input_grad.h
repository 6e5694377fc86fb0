// The backward of the denoiser's input concatenation and of the time embedding's fan-out
// (kernels/models/diffusion/diffusion_input_grad.cu): with du [rows, O + 2D] the gradient of the
// input rows u = [x_t | cond | temb] and dz [blocks][rows, D] (block k at dz + k * block_stride)
// the gradients of the blocks' pre-activations, to which temb was added:
//   dcond[r, c] = du[r, O + c]
//   dtemb[r, c] = du[r, O + D + c] + sum over k = 0..blocks-1 of dz_k[r, c]   (in k order)
// Overwrites dcond, dtemb [rows, D]. Elementwise, deterministic.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::diffusion {

void launch_diffusion_input_grad(float* dcond, float* dtemb, const float* du, const float* dz,
                                 std::size_t block_stride, std::size_t blocks, std::size_t rows,
                                 std::size_t outputs, std::size_t width, cudaStream_t stream);

}  // namespace resident::kernels::diffusion
