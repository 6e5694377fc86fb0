// Second pass of the deterministic column sums (column_partials.h): one thread per column adds
// the chunks' partials in chunk order (coalesced across the warp's columns).
#include <algorithm>

#include "kernels/nn/column_partials.h"
#include "kernels/nn/row_reduce.cuh"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr std::size_t kTargetChunkRows = 32;
constexpr std::size_t kMaxChunks = 1024;

__global__ void __launch_bounds__(rowwise::kRowThreads)
    sum_column_partials(float* out, const float* partials, std::size_t chunks, std::size_t cols,
                        bool accumulate) {
  const std::size_t c = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (c >= cols) return;
  float sum = 0.0f;
  for (std::size_t k = 0; k < chunks; ++k) sum += partials[k * cols + c];
  rowwise::write_grad(out + c, sum, accumulate);
}

}  // namespace

std::size_t column_chunks(std::size_t rows) {
  return std::clamp<std::size_t>((rows + kTargetChunkRows - 1) / kTargetChunkRows, 1, kMaxChunks);
}

std::size_t column_chunk_rows(std::size_t rows) {
  const std::size_t chunks = column_chunks(rows);
  return std::max<std::size_t>((rows + chunks - 1) / chunks, 1);
}

void launch_sum_column_partials(float* out, const float* partials, std::size_t chunks,
                                std::size_t cols, nn::GradMode mode, cudaStream_t stream) {
  const NvtxRange range("nn/sum_column_partials");
  if (cols == 0) return;
  const unsigned blocks = rowwise::grid_size(
      (cols + rowwise::kRowThreads - 1) / rowwise::kRowThreads, "sum_column_partials");
  sum_column_partials<<<blocks, rowwise::kRowThreads, 0, stream>>>(
      out, partials, chunks, cols, mode == nn::GradMode::Accumulate);
  RESIDENT_CHECK_LAUNCH("sum_column_partials");
}

}  // namespace resident::kernels
