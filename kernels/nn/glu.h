// GLU over the last dimension (kernels/nn/glu.cu): x [rows, 2 * half] = [a | b] per row,
// y [rows, half] = a * sigmoid(b). Row-major, fp32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/core/grad_mode.h"

namespace resident::kernels {

// y [rows, half] from x [rows, 2 * half] (overwrites y). y must not overlap x. Deterministic.
void launch_glu_forward(float* y, const float* x, std::size_t rows, std::size_t half,
                        cudaStream_t stream);

// dx [rows, 2 * half] from x [rows, 2 * half] and dy [rows, half]:
//   da = dy sigmoid(b),  db = dy a sigmoid(b) (1 - sigmoid(b)),
// overwriting dx (never read) or accumulating into it. dx must not overlap x or dy.
// Deterministic (each element of dx written once, by one thread).
void launch_glu_backward(float* dx, const float* x, const float* dy, std::size_t rows,
                         std::size_t half, nn::GradMode mode, cudaStream_t stream);

}  // namespace resident::kernels
