// The denoiser's first layer at one sampler step
// (kernels/models/diffusion/diffusion_sampler_input.cu). The window's and the step's parts of
// input([x_t | cond | temb]) are the same for every sample of a window and every row of a step, so
// the sampler forms them once: cond_proj [windows, D] = cond W_in[:, O:O+D]^T and time_proj [D] =
// temb(t) W_in[:, O+D:]^T. Per row r (window r / S):
//   h[r, j] = sum over o < O of x[r, o] W_in[j, o] (in o order) + cond_proj[r / S, j]
//             + time_proj[j] + bias[j]
// W_in [D, O + 2D] row-major (its first O columns are read). Overwrites h [rows, D];
// deterministic.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::diffusion {

void launch_diffusion_sampler_input(float* h, const float* x, const float* input_weight,
                                    const float* cond_proj, const float* time_proj,
                                    const float* bias, std::size_t rows,
                                    std::size_t samples_per_window, std::size_t outputs,
                                    std::size_t width, cudaStream_t stream);

}  // namespace resident::kernels::diffusion
