// Softmax and log-softmax over the rows of x [rows, cols] (kernels/nn/softmax.cu), optionally
// with a causal mask (kernels/core/softmax_mask.h: rows a multiple of cols, row r sees c <= r % cols).
//
// Contracts, for all four: row-major float buffers on the device; one row per warp group (cols
// <= 1024) or per block; max-subtracted; deterministic (fixed reduction order, no atomics; the
// result depends only on the values and cols); nothing allocated or synchronized (capturable).
// Shapes are checked on the host and throw resident::Error; rows == 0 or cols == 0 does nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/core/grad_mode.h"
#include "kernels/core/softmax_mask.h"

namespace resident::kernels {

// y [rows, cols] = softmax(x) over each row's visible columns; masked entries are exactly 0.
// Overwrites y; y may alias x.
void launch_softmax_forward(float* y, const float* x, std::size_t rows, std::size_t cols,
                            nn::SoftmaxMask mask, cudaStream_t stream);

// y [rows, cols] = log_softmax(x); masked entries are exactly -infinity. Overwrites y; y may
// alias x.
void launch_log_softmax_forward(float* y, const float* x, std::size_t rows, std::size_t cols,
                                nn::SoftmaxMask mask, cudaStream_t stream);

// From the forward's output y = softmax(x): dx = y * (dy - sum_visible(y * dy)) at visible
// columns, exactly 0 at masked ones (dy there is not read). Overwrites or accumulates into dx
// [rows, cols] as `mode` says; when overwriting, dx may alias y or dy.
void launch_softmax_backward(float* dx, const float* y, const float* dy, std::size_t rows,
                             std::size_t cols, nn::SoftmaxMask mask, nn::GradMode mode,
                             cudaStream_t stream);

// From the forward's output y = log_softmax(x): dx = dy - e^y * sum_visible(dy) at visible
// columns, exactly 0 at masked ones (dy there is not read). Overwrites or accumulates into dx
// [rows, cols]; when overwriting, dx may alias y or dy.
void launch_log_softmax_backward(float* dx, const float* y, const float* dy, std::size_t rows,
                                 std::size_t cols, nn::SoftmaxMask mask, nn::GradMode mode,
                                 cudaStream_t stream);

}  // namespace resident::kernels
