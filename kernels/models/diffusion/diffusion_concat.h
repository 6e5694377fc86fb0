// The denoiser's input rows (kernels/models/diffusion/diffusion_concat.cu):
//   u[r] = [x_t[r, 0:O] | cond[r, 0:D] | temb[r, 0:D]]     u [rows, O + 2D], overwritten
// x_t [rows, O], cond [rows, D], temb [rows, D] row-major. Elementwise copy; deterministic.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::diffusion {

void launch_diffusion_concat(float* u, const float* x_t, const float* cond, const float* temb,
                             std::size_t rows, std::size_t outputs, std::size_t width,
                             cudaStream_t stream);

}  // namespace resident::kernels::diffusion
