// Causal depthwise 1-D convolution over time, kernel size K, with bias and an optional fused
// SiLU (kernels/nn/causal_conv1d.cu), as tests/reference/mamba2_reference.h defines it:
//   pre[b, t, c] = bias[c] + sum_{k < K} weight[c, k] u[b, t - K + 1 + k, c]   (u = 0 before t = 0)
//   y[b, t, c]   = SiLU(pre) when `silu`, else pre
// u, y, du, dy are [batch * length, channels] views with their own row strides (a column block
// of a wider matrix works: pass the pointer to its first column and the full row stride);
// weight [channels, K] (PyTorch's [C, 1, K]), bias [channels] or null (no bias); 1 <= K <= 8.
//
// Forward: each thread owns one channel and 16 consecutive rows (register window, each u read
// once); y overwritten (must not alias u).
// Backward: du (when non-null) is overwritten; dweight and dbias (each non-null one) are
// overwritten or accumulated into as `mode` says. The SiLU derivative uses the pre-activation recomputed from u. dweight and dbias are
// summed in two fixed-order passes through `scratch` (per 128-row block partials, then the blocks
// in order): deterministic, no atomics. Nothing allocated or synchronized (capturable); bad
// arguments throw resident::Error before anything is enqueued.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/core/grad_mode.h"

namespace resident::kernels {

inline constexpr std::size_t kCausalConvMaxKernel = 8;

void launch_causal_conv1d_forward(float* y, std::size_t y_stride, const float* u,
                                  std::size_t u_stride, const float* weight, const float* bias,
                                  std::size_t batch, std::size_t length, std::size_t channels,
                                  std::size_t kernel, bool silu, cudaStream_t stream);

// Floats of scratch the backward needs (always: the row pass writes the parameter partials): ceil(batch * length / 64) * channels * (K + 1).
std::size_t causal_conv1d_backward_scratch_floats(std::size_t batch, std::size_t length,
                                                  std::size_t channels, std::size_t kernel);

void launch_causal_conv1d_backward(float* du, std::size_t du_stride, float* dweight, float* dbias,
                                   float* scratch, std::size_t scratch_floats, const float* dy,
                                   std::size_t dy_stride, const float* u, std::size_t u_stride,
                                   const float* weight, const float* bias, std::size_t batch,
                                   std::size_t length, std::size_t channels, std::size_t kernel,
                                   bool silu, nn::GradMode mode, cudaStream_t stream);

}  // namespace resident::kernels
