// Elementwise activation forward and backward. One grid-stride kernel per direction, templated
// on the kind (the launcher dispatches once; no switch per element). Each element is read and
// written by one thread, reads before its write: in-place use is safe. fp32 math, formulas in
// activation_math.cuh. Deterministic.
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "kernels/nn/activation.h"
#include "kernels/nn/activation_math.cuh"
#include "kernels/core/launch_config.h"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels {

namespace {

template <ActivationKind Kind>
__global__ void activation_forward(float* y, const float* x, std::size_t n, Activation a) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    y[i] = activation_math::value<Kind>(x[i], a);
}

template <ActivationKind Kind>
__global__ void activation_backward(float* dx, const float* x, const float* dy, std::size_t n,
                                    Activation a, bool accumulate) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const float g = dy[i] * activation_math::derivative<Kind>(x[i], a);
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

constexpr unsigned kBlock = 256;

template <ActivationKind Kind>
using KindConstant = std::integral_constant<ActivationKind, Kind>;

// Checks the parameters, then calls launch(KindConstant<kind>{}).
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

}  // namespace

void launch_activation_forward(float* y, const float* x, std::size_t n,
                               const Activation& activation, cudaStream_t stream) {
  const NvtxRange range("nn/activation_forward");
  dispatch(activation, "activation_forward", [&](auto kind) {
    if (n == 0) return;
    activation_forward<decltype(kind)::value>
        <<<grid_stride_blocks(n, kBlock), kBlock, 0, stream>>>(y, x, n, activation);
    RESIDENT_CHECK_LAUNCH("activation_forward");
  });
}

void launch_activation_backward(float* dx, const float* x, const float* dy, std::size_t n,
                                const Activation& activation, nn::GradMode mode,
                                cudaStream_t stream) {
  const NvtxRange range("nn/activation_backward");
  dispatch(activation, "activation_backward", [&](auto kind) {
    if (n == 0) return;
    activation_backward<decltype(kind)::value><<<grid_stride_blocks(n, kBlock), kBlock, 0, stream>>>(
        dx, x, dy, n, activation, mode == nn::GradMode::Accumulate);
    RESIDENT_CHECK_LAUNCH("activation_backward");
  });
}

}  // namespace resident::kernels
