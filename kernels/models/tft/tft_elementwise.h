// TFT's elementwise and layout kernels (kernels/models/tft/tft_elementwise.cu): the prescalers,
// sums of buffers and the last-step (query) rows of a batch-major [B, L, W] tensor.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/core/grad_mode.h"

namespace resident::kernels::tft {

// e [N, F, dc] (overwritten) = w[j, c] x[n, j] + b[j, c] for the N = B L rows of x [N, F] and the
// prescalers w, b [F, dc]. Exact (one fma); capturable.
void launch_prescale_forward(float* e, const float* x, const float* w, const float* b,
                             std::size_t rows, std::size_t features, std::size_t width,
                             cudaStream_t stream);

// terms [N, F, dc] (overwritten) = de[n, j, c] x[n, j]: the per-row terms of dLoss/dw, whose
// column sums (kernels/nn/bias.h) are the prescalers' weight gradient. terms may alias de.
void launch_prescale_weight_terms(float* terms, const float* de, const float* x,
                                  std::size_t rows, std::size_t features, std::size_t width,
                                  cudaStream_t stream);

// dst[i] = src[i] (Overwrite) or dst[i] += src[i] (Accumulate), i < n; dst may alias nothing
// but itself. Exact; capturable.
void launch_add_into(float* dst, const float* src, std::size_t n, nn::GradMode mode,
                     cudaStream_t stream);

// r [rows, half] (overwritten) = resid + a * sigmoid(g) for pre [rows, 2 half] = [a | g] per row:
// a GLU added to a residual (the gate-add step before a LayerNorm). r may alias resid, not pre.
void launch_glu_add(float* r, const float* pre, const float* resid, std::size_t rows,
                    std::size_t half, cudaStream_t stream);

// out [B, W] (overwritten) = rows (b, L - 1) of in [B, L, W].
void launch_last_step_gather(float* out, const float* in, std::size_t batch, std::size_t steps,
                             std::size_t width, cudaStream_t stream);

// rows (b, L - 1) of inout [B, L, W] += add [B, W] (accumulates; the other rows untouched).
void launch_last_step_add(float* inout, const float* add, std::size_t batch, std::size_t steps,
                          std::size_t width, cudaStream_t stream);

}  // namespace resident::kernels::tft
