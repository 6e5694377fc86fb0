// Bias kernels of Linear (kernels/nn/bias.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/core/grad_mode.h"

namespace resident::kernels {

// y[r, c] += bias[c] for y [rows, cols] row-major (accumulates into y).
void launch_add_bias(float* y, const float* bias, std::size_t rows, std::size_t cols,
                     cudaStream_t stream);

// dbias[c] = sum over r of dy[r, c] (overwrite) or dbias[c] += that sum (accumulate), in a fixed
// order that depends on (rows, cols) alone: deterministic, no atomics. rows == 0 gives zero sums.
void launch_bias_grad(float* dbias, const float* dy, std::size_t rows, std::size_t cols,
                      nn::GradMode mode, cudaStream_t stream);

}  // namespace resident::kernels
