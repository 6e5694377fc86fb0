// Bias broadcast-add and its gradient (column sums).
// add_bias: one thread per element of y [rows, cols]; accumulates bias[c] into y[r, c].
// bias_grad: the column sums of dy in one launch (column_tile_sum.cuh: a fixed per-column order
// that depends on the shape alone), overwritten or accumulated into dbias[c]. Deterministic.
#include "kernels/nn/bias.h"
#include "kernels/core/launch_config.h"
#include "kernels/nn/column_tile_sum.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

__global__ void add_bias(float* y, const float* bias, std::size_t rows, std::size_t cols) {
  const std::size_t total = rows * cols;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < total;
       i += std::size_t{gridDim.x} * blockDim.x)
    y[i] += bias[i % cols];
}

struct RowValue {
  const float* dy;
  std::size_t cols;
  __device__ float load(std::size_t r, std::size_t c) const { return dy[r * cols + c]; }
  __device__ float apply(std::size_t, std::size_t, float v) const { return v; }
};

__global__ void __launch_bounds__(column_tile::kThreads)
    bias_grad(float* dbias, const float* __restrict__ dy, std::size_t rows, std::size_t cols,
              unsigned width, bool accumulate) {
  std::size_t c = 0;
  const float sum = column_tile::sum_block_columns(rows, cols, width, RowValue{dy, cols}, c);
  if (threadIdx.x < width && c < cols && blockIdx.y == 0)
    rowwise::write_grad(dbias + c, sum, accumulate);
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
  const column_tile::Shape tile = column_tile::shape_for(rows, cols);
  column_tile::launch(tile, stream, bias_grad, dbias, dy, rows, cols, tile.width,
                      mode == nn::GradMode::Accumulate);
}

}  // namespace resident::kernels
