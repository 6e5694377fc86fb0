// GLU forward and backward: one grid-stride thread per output element (r, c) of [rows, half];
// it reads a = x[r, c] and b = x[r, half + c] and, in the backward, writes dx at both. Adjacent
// threads touch adjacent columns of both halves (coalesced). fp32, deterministic.
#include <algorithm>

#include "kernels/nn/activation_math.cuh"
#include "kernels/nn/glu.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

__global__ void glu_forward(float* y, const float* x, std::size_t rows, std::size_t half) {
  const std::size_t total = rows * half;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < total;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t r = i / half;
    const std::size_t a_index = i + r * half;  // r * 2 * half + c
    y[i] = x[a_index] * activation_math::sigmoid(x[a_index + half]);
  }
}

__global__ void glu_backward(float* dx, const float* x, const float* dy, std::size_t rows,
                             std::size_t half, bool accumulate) {
  const std::size_t total = rows * half;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < total;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t r = i / half;
    const std::size_t a_index = i + r * half;
    const std::size_t b_index = a_index + half;
    const float a = x[a_index];
    const activation_math::SigmoidPair s = activation_math::sigmoid_pair(x[b_index]);
    const float upstream = dy[i];
    const float da = upstream * s.value;
    const float db = upstream * a * s.value * s.complement;
    dx[a_index] = accumulate ? dx[a_index] + da : da;
    dx[b_index] = accumulate ? dx[b_index] + db : db;
  }
}

constexpr unsigned kBlock = 256;

}  // namespace

void launch_glu_forward(float* y, const float* x, std::size_t rows, std::size_t half,
                        cudaStream_t stream) {
  const NvtxRange range("nn/glu_forward");
  if (rows == 0 || half == 0) return;
  glu_forward<<<grid_stride_blocks(rows * half, kBlock), kBlock, 0, stream>>>(y, x, rows, half);
  RESIDENT_CHECK_LAUNCH("glu_forward");
}

void launch_glu_backward(float* dx, const float* x, const float* dy, std::size_t rows,
                         std::size_t half, nn::GradMode mode, cudaStream_t stream) {
  const NvtxRange range("nn/glu_backward");
  if (rows == 0 || half == 0) return;
  glu_backward<<<grid_stride_blocks(rows * half, kBlock), kBlock, 0, stream>>>(
      dx, x, dy, rows, half, mode == nn::GradMode::Accumulate);
  RESIDENT_CHECK_LAUNCH("glu_backward");
}

}  // namespace resident::kernels
