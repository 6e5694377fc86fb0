// Fused bias + activation of an MLP's hidden layer (kernels/nn/bias_activation.cu): the forward
// after the layer's GEMM, and the backward that also yields the bias gradient, each one launch
// instead of two. Same math as launch_add_bias + launch_activation_forward and
// launch_activation_backward + launch_bias_grad (bit for bit: the same fp32 operations).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/nn/activation.h"
#include "kernels/core/grad_mode.h"

namespace resident::kernels {

// z [rows, cols] row-major holds x W^T on entry: z[r, c] += bias[c] (accumulated in place: z is
// the saved pre-activation), y[r, c] = f(z[r, c]) (overwritten; y must not alias z).
// Elementwise, deterministic. Throws as launch_activation_forward does.
void launch_bias_activation_forward(float* z, float* y, const float* bias, std::size_t rows,
                                    std::size_t cols, const Activation& activation,
                                    cudaStream_t stream);

// What the activation backward reads as its `z` argument: the pre-activation z (any kind), or the
// output y = f(z) (ReLU and tanh only, derivative_from_output_exact in activation.h: f' from y is
// the same fp32 arithmetic, so the results are the same bits; a forward then need not keep z).
enum class SavedActivation { PreActivation, Output };

// dz[r, c] = da[r, c] * f'(z[r, c]) (overwritten; dz may alias da) and dbias[c] = sum over r of
// dz[r, c], overwritten or accumulated as `mode` says, in the fixed order of launch_bias_grad
// (depends on the shape alone: deterministic, no atomics). One launch. With `saved` = Output, the
// `z` argument holds y = f(z) instead (throws for a kind other than ReLU or tanh).
void launch_activation_backward_bias_grad(
    float* dz, float* dbias, const float* z, const float* da, std::size_t rows, std::size_t cols,
    const Activation& activation, nn::GradMode mode, cudaStream_t stream,
    SavedActivation saved = SavedActivation::PreActivation);

}  // namespace resident::kernels
