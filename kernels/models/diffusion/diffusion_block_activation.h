// A residual block's hidden activation (kernels/models/diffusion/diffusion_block_activation.cu):
// z [rows, D] holds LN(h) W1^T on entry;
//   z[r, c] += bias[c] + temb[r * temb_row_stride + c]   (in place: z is the saved pre-activation)
//   a[r, c]  = silu(z[r, c])                              (overwritten; a must not alias z)
// temb_row_stride = D for a time embedding per row (training), 0 for one row shared by every row
// (the sampler's step). Elementwise, deterministic; silu as kernels/nn/activation_math.cuh forms
// it, so the kit's activation backward is its derivative.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::diffusion {

void launch_diffusion_block_activation(float* z, float* a, const float* bias, const float* temb,
                                       std::size_t temb_row_stride, std::size_t rows,
                                       std::size_t width, cudaStream_t stream);

}  // namespace resident::kernels::diffusion
