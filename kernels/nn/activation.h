// Elementwise activations of the nn kit (kernels/nn/activation.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/core/grad_mode.h"

namespace resident::kernels {

enum class ActivationKind { Relu, Tanh, Sigmoid, Silu, GeluTanh, Elu, Softplus };

// Kinds whose f' can be formed from y = f(x) alone with the same fp32 operations as from x:
// ReLU (y > 0 exactly when x > 0) and tanh (1 - y * y with y = tanhf(x), as its derivative is
// computed from x). Their backward may read the saved output instead of the pre-activation.
constexpr bool derivative_from_output_exact(ActivationKind kind) {
  return kind == ActivationKind::Relu || kind == ActivationKind::Tanh;
}

// One activation and its parameters (the fields of other kinds are ignored).
//   Relu      max(x, 0); relu'(0) = 0
//   Tanh      tanh(x)
//   Sigmoid   1 / (1 + e^-x)
//   Silu      x sigmoid(x)
//   GeluTanh  0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   Elu       x for x > 0, elu_alpha (e^x - 1) otherwise
//   Softplus  log(1 + e^(beta x)) / beta, and x where beta x > threshold (PyTorch); beta > 0
struct Activation {
  ActivationKind kind = ActivationKind::Relu;
  float elu_alpha = 1.0f;
  float softplus_beta = 1.0f;
  float softplus_threshold = 20.0f;
};

// y[i] = f(x[i]) for i < n (overwrites y). y may alias x. Deterministic. Throws resident::Error
// for softplus_beta <= 0 (or not finite) and for an unknown kind.
void launch_activation_forward(float* y, const float* x, std::size_t n,
                               const Activation& activation, cudaStream_t stream);

// dx[i] = dy[i] * f'(x[i]) (overwrite: dx is never read) or dx[i] += that (accumulate), i < n.
// dx may alias x or dy. Deterministic. Throws as the forward does.
void launch_activation_backward(float* dx, const float* x, const float* dy, std::size_t n,
                                const Activation& activation, nn::GradMode mode,
                                cudaStream_t stream);

}  // namespace resident::kernels
