// fp32 device formulas of the activations, value and derivative, one small function each: the
// formulas of the double reference (tests/reference/nn_reference_activations.cpp) in its
// overflow-free forms, with 1 - sigmoid taken as sigmoid(-x) rather than by subtraction (see
// sigmoid_pair). Shared by the activation, fused bias-activation and GLU kernels, with the
// host-side dispatch on the kind.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <string>
#include <type_traits>

#include "kernels/nn/activation.h"
#include "kernels/core/error.h"

namespace resident::kernels::activation_math {

// sigmoid(x) and its complement 1 - sigmoid(x) = sigmoid(-x), each to full relative precision
// (1 - s computed from a rounded s loses all of it once s is near 1), from one expf that cannot
// overflow: e = e^-|x| <= 1.
struct SigmoidPair {
  float value;       // sigmoid(x)
  float complement;  // 1 - sigmoid(x)
};

__device__ inline SigmoidPair sigmoid_pair(float x) {
  const float e = expf(-fabsf(x));
  const float large = 1.0f / (1.0f + e);  // sigmoid(|x|)
  const float small = e * large;          // sigmoid(-|x|)
  return x >= 0.0f ? SigmoidPair{large, small} : SigmoidPair{small, large};
}

// 1 / (1 + e^-x): for x >= 0 as such, for x < 0 as e^x / (1 + e^x) (no overflow of e^-x).
__device__ inline float sigmoid(float x) { return sigmoid_pair(x).value; }

// log(1 + e^x) without overflow.
__device__ inline float log1p_exp(float x) {
  return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}

__device__ inline float relu(float x) { return x > 0.0f ? x : 0.0f; }
__device__ inline float relu_derivative(float x) { return x > 0.0f ? 1.0f : 0.0f; }

__device__ inline float tanh_value(float x) { return tanhf(x); }
__device__ inline float tanh_derivative(float x) {
  const float t = tanhf(x);
  return 1.0f - t * t;
}

__device__ inline float sigmoid_derivative(float x) {
  const SigmoidPair s = sigmoid_pair(x);
  return s.value * s.complement;
}

__device__ inline float silu(float x) { return x * sigmoid(x); }
// s (1 + x (1 - s)), s = sigmoid(x)
__device__ inline float silu_derivative(float x) {
  const SigmoidPair s = sigmoid_pair(x);
  return s.value * (1.0f + x * s.complement);
}

constexpr float kGeluCubic = 0.044715f;
constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2 / pi)

// u = sqrt(2/pi) (x + 0.044715 x^3). With 0.5 (1 + tanh(u)) = sigmoid(2u) and
// 1 - tanh(u)^2 = 4 sigmoid(2u) (1 - sigmoid(2u)), the reference's formulas become the ones
// below: equal in exact arithmetic, and in fp32 free of the cancellation in 1 + tanh(u) for
// negative x.
__device__ inline float gelu_tanh(float x) {
  const float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  return x * sigmoid(2.0f * u);
}
// 0.5 (1 + t) + 0.5 x (1 - t^2) u'  =  s + 2 x s (1 - s) u',  s = sigmoid(2u)
__device__ inline float gelu_tanh_derivative(float x) {
  const float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  const float inner_derivative = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  const SigmoidPair s = sigmoid_pair(2.0f * u);
  return s.value + 2.0f * x * s.value * s.complement * inner_derivative;
}

__device__ inline float elu(float x, float alpha) { return x > 0.0f ? x : alpha * expm1f(x); }
__device__ inline float elu_derivative(float x, float alpha) {
  return x > 0.0f ? 1.0f : alpha * expf(x);
}

__device__ inline float softplus(float x, float beta, float threshold) {
  const float bx = beta * x;
  return bx > threshold ? x : log1p_exp(bx) / beta;
}
__device__ inline float softplus_derivative(float x, float beta, float threshold) {
  const float bx = beta * x;
  return bx > threshold ? 1.0f : sigmoid(bx);
}

// f(x) for a kind fixed at compile time.
template <ActivationKind Kind>
__device__ inline float value(float x, const Activation& a) {
  if constexpr (Kind == ActivationKind::Relu) return relu(x);
  if constexpr (Kind == ActivationKind::Tanh) return tanh_value(x);
  if constexpr (Kind == ActivationKind::Sigmoid) return sigmoid(x);
  if constexpr (Kind == ActivationKind::Silu) return silu(x);
  if constexpr (Kind == ActivationKind::GeluTanh) return gelu_tanh(x);
  if constexpr (Kind == ActivationKind::Elu) return elu(x, a.elu_alpha);
  if constexpr (Kind == ActivationKind::Softplus)
    return softplus(x, a.softplus_beta, a.softplus_threshold);
}

// f'(x) for a kind fixed at compile time.
template <ActivationKind Kind>
__device__ inline float derivative(float x, const Activation& a) {
  if constexpr (Kind == ActivationKind::Relu) return relu_derivative(x);
  if constexpr (Kind == ActivationKind::Tanh) return tanh_derivative(x);
  if constexpr (Kind == ActivationKind::Sigmoid) return sigmoid_derivative(x);
  if constexpr (Kind == ActivationKind::Silu) return silu_derivative(x);
  if constexpr (Kind == ActivationKind::GeluTanh) return gelu_tanh_derivative(x);
  if constexpr (Kind == ActivationKind::Elu) return elu_derivative(x, a.elu_alpha);
  if constexpr (Kind == ActivationKind::Softplus)
    return softplus_derivative(x, a.softplus_beta, a.softplus_threshold);
}

// f'(x) from y = f(x) for the kinds of derivative_from_output_exact (activation.h) (bit for bit derivative<Kind>(x)); NaN for any other kind
// (the launchers refuse them before a launch).
template <ActivationKind Kind>
__device__ inline float derivative_from_output(float y) {
  if constexpr (Kind == ActivationKind::Relu) return relu_derivative(y);
  else if constexpr (Kind == ActivationKind::Tanh) return 1.0f - y * y;
  else return __int_as_float(0x7fc00000);
}

template <ActivationKind Kind>
using KindConstant = std::integral_constant<ActivationKind, Kind>;

// Host side: checks the parameters, then calls launch(KindConstant<kind>{}) once, so kernels
// are templated on the kind (no switch per element). Throws resident::Error for softplus_beta
// <= 0 (or not finite) and for an unknown kind.
template <typename Launch>
void dispatch(const Activation& a, const char* op, Launch&& launch) {
  const bool beta_ok = a.softplus_beta > 0.0f && std::isfinite(a.softplus_beta);
  if (a.kind == ActivationKind::Softplus && !beta_ok)
    throw Error(op, "invalid argument",
                "softplus_beta = " + std::to_string(a.softplus_beta) + ", must be > 0", __FILE__,
                __LINE__);
  switch (a.kind) {
    case ActivationKind::Relu: return launch(KindConstant<ActivationKind::Relu>{});
    case ActivationKind::Tanh: return launch(KindConstant<ActivationKind::Tanh>{});
    case ActivationKind::Sigmoid: return launch(KindConstant<ActivationKind::Sigmoid>{});
    case ActivationKind::Silu: return launch(KindConstant<ActivationKind::Silu>{});
    case ActivationKind::GeluTanh: return launch(KindConstant<ActivationKind::GeluTanh>{});
    case ActivationKind::Elu: return launch(KindConstant<ActivationKind::Elu>{});
    case ActivationKind::Softplus: return launch(KindConstant<ActivationKind::Softplus>{});
  }
  throw Error(op, "invalid argument",
              "unknown ActivationKind " + std::to_string(static_cast<int>(a.kind)), __FILE__,
              __LINE__);
}

}  // namespace resident::kernels::activation_math
