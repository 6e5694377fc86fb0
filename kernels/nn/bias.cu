// Bias broadcast-add and its gradient (column sums).
// add_bias: one thread per element of y [rows, cols]; accumulates bias[c] into y[r, c].
// bias_grad: one thread per column c sums dy[0..rows, c] in row order (coalesced across the
// warp's columns), then overwrites or accumulates into dbias[c]. Deterministic.
#include "kernels/nn/bias.h"
#include "kernels/core/launch_config.h"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels {

namespace {

__global__ void add_bias(float* y, const float* bias, std::size_t rows, std::size_t cols) {
  const std::size_t total = rows * cols;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < total;
       i += std::size_t{gridDim.x} * blockDim.x)
    y[i] += bias[i % cols];
}

__global__ void bias_grad(float* dbias, const float* dy, std::size_t rows, std::size_t cols,
                          bool accumulate) {
  const std::size_t c = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (c >= cols) return;
  float sum = 0.0f;
  for (std::size_t r = 0; r < rows; ++r) sum += dy[r * cols + c];
  dbias[c] = accumulate ? dbias[c] + sum : sum;
}

}  // namespace

void launch_add_bias(float* y, const float* bias, std::size_t rows, std::size_t cols,
                     cudaStream_t stream) {
  const NvtxRange range("nn/add_bias");
  if (rows == 0 || cols == 0) return;
  add_bias<<<grid_stride_blocks(rows * cols, 256), 256, 0, stream>>>(y, bias, rows, cols);
  RESIDENT_CHECK_LAUNCH("add_bias");
}

void launch_bias_grad(float* dbias, const float* dy, std::size_t rows, std::size_t cols,
                      nn::GradMode mode, cudaStream_t stream) {
  const NvtxRange range("nn/bias_grad");
  if (cols == 0) return;
  bias_grad<<<static_cast<unsigned>((cols + 127) / 128), 128, 0, stream>>>(
      dbias, dy, rows, cols, mode == nn::GradMode::Accumulate);
  RESIDENT_CHECK_LAUNCH("bias_grad");
}

}  // namespace resident::kernels
