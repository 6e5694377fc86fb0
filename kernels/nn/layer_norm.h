// LayerNorm over the last dimension (kernels/nn/layer_norm.cu), as the reference defines it:
//   y = (x - mean) * rstd * gamma + beta,  rstd = 1 / sqrt(biased variance + eps),
// mean and variance over each row of x [rows, cols]; gamma, beta [cols]; eps > 0.
// Row-major float buffers on the device; one row per warp group (cols <= 1024) or per block;
// deterministic (fixed reduction orders, no atomics; results depend only on the values and the
// shape); nothing allocated or synchronized (capturable). Bad arguments throw resident::Error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/core/grad_mode.h"

namespace resident::kernels {

// Overwrites y [rows, cols] and, when non-null, mean [rows] and rstd [rows] (what the backward
// needs). The variance is taken about the mean (two passes over the row), not as E[x^2] - mean^2.
// beta may be null (no shift). y may alias x.
void launch_layer_norm_forward(float* y, float* mean, float* rstd, const float* x,
                               const float* gamma, const float* beta, std::size_t rows,
                               std::size_t cols, float eps, cudaStream_t stream);

// Floats of scratch launch_layer_norm_backward needs when dgamma or dbeta is wanted:
// 2 * column_chunks(rows) * cols (kernels/nn/column_partials.h).
std::size_t layer_norm_backward_scratch_floats(std::size_t rows, std::size_t cols);

// With g = dy * gamma and xhat = (x - mean) * rstd (mean, rstd from the forward):
//   dx [rows, cols] = rstd * (g - mean_row(g) - xhat * mean_row(g * xhat))
//   dgamma [cols]   = sum over rows of dy * xhat,  dbeta [cols] = sum over rows of dy
// Each non-null gradient is overwritten or accumulated into as `mode` says; null ones are
// skipped. dgamma/dbeta are summed in two passes through `scratch` [scratch_floats >=
// layer_norm_backward_scratch_floats(rows, cols)]: per-chunk partials in row order, then the
// chunks in order. With rows == 0, dgamma and dbeta are sums over no rows (0). When overwriting,
// dx may alias dy.
void launch_layer_norm_backward(float* dx, float* dgamma, float* dbeta, float* scratch,
                                std::size_t scratch_floats, const float* x, const float* gamma,
                                const float* mean, const float* rstd, const float* dy,
                                std::size_t rows, std::size_t cols, nn::GradMode mode,
                                cudaStream_t stream);

}  // namespace resident::kernels
