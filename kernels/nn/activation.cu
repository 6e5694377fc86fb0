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
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

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

}  // namespace

void launch_activation_forward(float* y, const float* x, std::size_t n,
                               const Activation& activation, cudaStream_t stream) {
  const NvtxRange range("nn/activation_forward");
  activation_math::dispatch(activation, "activation_forward", [&](auto kind) {
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
  activation_math::dispatch(activation, "activation_backward", [&](auto kind) {
    if (n == 0) return;
    activation_backward<decltype(kind)::value><<<grid_stride_blocks(n, kBlock), kBlock, 0, stream>>>(
        dx, x, dy, n, activation, mode == nn::GradMode::Accumulate);
    RESIDENT_CHECK_LAUNCH("activation_backward");
  });
}

}  // namespace resident::kernels
