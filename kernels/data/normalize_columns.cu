// z-scores in place (contract in normalize_columns.h).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/data/normalize_columns.h"

namespace resident::kernels::data {

namespace {

constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    normalize_columns(float* values, const double* mean, const double* stddev, std::size_t n,
                      std::size_t columns) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const std::size_t c = i % columns;
    values[i] = static_cast<float>(
        __ddiv_rn(__dsub_rn(static_cast<double>(values[i]), mean[c]), stddev[c]));
  }
}

}  // namespace

void launch_normalize_columns(float* values, const double* mean, const double* stddev,
                              std::size_t rows, std::size_t columns, cudaStream_t stream) {
  if (rows == 0 || columns == 0)
    throw Error("launch_normalize_columns", "invalid argument",
                "rows = " + std::to_string(rows) + ", columns = " + std::to_string(columns) +
                    "; both must be >= 1",
                __FILE__, __LINE__);
  const NvtxRange range("data/normalize_columns");
  const std::size_t n = rows * columns;
  normalize_columns<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(values, mean, stddev,
                                                                              n, columns);
  RESIDENT_CHECK_LAUNCH("normalize_columns");
}

}  // namespace resident::kernels::data
