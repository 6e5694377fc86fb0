// Per-column mean and standard deviation (contract in column_stats.h).
#include <cmath>
#include <limits>
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/data/column_stats.h"

namespace resident::kernels::data {

namespace {

constexpr unsigned kThreads = 256;

// Fixed-order tree over the block's 256 values in shared memory; returns the sum to every thread.
__device__ double block_sum(double value, double* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (unsigned width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width)
      shared[threadIdx.x] = __dadd_rn(shared[threadIdx.x], shared[threadIdx.x + width]);
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();  // shared is reused by the next call
  return total;
}

__global__ void __launch_bounds__(kThreads)
    column_stats(double* mean, double* stddev, const float* values, std::size_t rows,
                 std::size_t columns, double epsilon) {
  __shared__ double shared[kThreads];
  const std::size_t c = blockIdx.x;
  double sum = 0.0;
  for (std::size_t t = threadIdx.x; t < rows; t += kThreads)
    sum = __dadd_rn(sum, static_cast<double>(values[t * columns + c]));
  const double m = __ddiv_rn(block_sum(sum, shared), static_cast<double>(rows));
  double squares = 0.0;
  for (std::size_t t = threadIdx.x; t < rows; t += kThreads) {
    const double d = __dsub_rn(static_cast<double>(values[t * columns + c]), m);
    squares = __dadd_rn(squares, __dmul_rn(d, d));
  }
  const double variance = __ddiv_rn(block_sum(squares, shared), static_cast<double>(rows));
  if (threadIdx.x == 0) {
    mean[c] = m;
    stddev[c] = __dsqrt_rn(__dadd_rn(variance, epsilon));
  }
}

}  // namespace

void launch_column_stats(double* mean, double* stddev, const float* values, std::size_t rows,
                         std::size_t columns, double epsilon, cudaStream_t stream) {
  if (rows == 0 || columns == 0 ||
      columns > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw Error("launch_column_stats", "invalid argument",
                "rows = " + std::to_string(rows) + ", columns = " + std::to_string(columns) +
                    "; allowed rows >= 1 and columns in [1, 2147483647]",
                __FILE__, __LINE__);
  if (!(std::isfinite(epsilon) && epsilon > 0.0))
    throw Error("launch_column_stats", "invalid argument",
                "epsilon = " + std::to_string(epsilon) + ", allowed finite and > 0", __FILE__,
                __LINE__);
  const NvtxRange range("data/column_stats");
  column_stats<<<static_cast<unsigned>(columns), kThreads, 0, stream>>>(mean, stddev, values, rows,
                                                                        columns, epsilon);
  RESIDENT_CHECK_LAUNCH("column_stats");
}

}  // namespace resident::kernels::data
