// RMSNorm over the last dimension (kernels/nn/rms_norm.cu), as the reference defines it:
//   y = x * rstd * gamma,  rstd = 1 / sqrt(mean(x^2) + eps),
// the mean over each row of x [rows, cols]; gamma [cols]; eps > 0.
// Row-major float buffers on the device; one row per warp group (cols <= 1024) or per block;
// deterministic (fixed reduction orders, no atomics; results depend only on the values and the
// shape); nothing allocated or synchronized (capturable). Bad arguments throw resident::Error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/core/grad_mode.h"

namespace resident::kernels {

// Overwrites y [rows, cols] and, when non-null, rstd [rows] (what the backward needs). y may
// alias x.
void launch_rms_norm_forward(float* y, float* rstd, const float* x, const float* gamma,
                             std::size_t rows, std::size_t cols, float eps, cudaStream_t stream);

// Floats of scratch launch_rms_norm_backward needs when dgamma is wanted:
// column_chunks(rows) * cols (kernels/nn/column_partials.h).
std::size_t rms_norm_backward_scratch_floats(std::size_t rows, std::size_t cols);

// With g = dy * gamma and s = rstd from the forward:
//   dx [rows, cols] = s * (g - x * s^2 * mean_row(g * x)),  dgamma [cols] = sum over rows of
//   dy * x * s
// Each non-null gradient is overwritten or accumulated into as `mode` says; null ones are
// skipped. dgamma is summed in two passes through `scratch` [scratch_floats >=
// rms_norm_backward_scratch_floats(rows, cols)]: per-chunk partials in row order, then the chunks
// in order. With rows == 0, dgamma is a sum over no rows (0). When overwriting, dx may alias dy.
void launch_rms_norm_backward(float* dx, float* dgamma, float* scratch, std::size_t scratch_floats,
                              const float* x, const float* gamma, const float* rstd,
                              const float* dy, std::size_t rows, std::size_t cols,
                              nn::GradMode mode, cudaStream_t stream);

}  // namespace resident::kernels
