// A residual block's output (kernels/models/diffusion/diffusion_residual.cu):
//   out[r, c] = h[r, c] + y[r, c] + bias[c]      out, h, y [rows, D]; bias [D]
// with y = silu(z) W2^T from the block's GEMM. Overwrites out, which may alias h or y.
// Elementwise, deterministic.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::diffusion {

void launch_diffusion_residual(float* out, const float* h, const float* y, const float* bias,
                               std::size_t rows, std::size_t width, cudaStream_t stream);

}  // namespace resident::kernels::diffusion
