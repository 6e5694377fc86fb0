// KAN operand: one block per (row, chunk of kThreads inputs). Each thread sums its input's
// partials in a fixed order, squashes it, writes silu(u) and its nb bases into a shared tile (row
// stride nb | 1, odd, so the threads' writes fall in distinct banks); the block then copies the
// tile to the operand's spline columns of its chunk, which are contiguous, in coalesced order.
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/kan/kan_bases.cuh"
#include "kernels/models/kan/kan_operand.h"

namespace resident::kernels::kan {

namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxRowBlocks = 65535;

__host__ __device__ inline int tile_stride(int nb) { return nb | 1; }

template <int kOrder>
__global__ void __launch_bounds__(kThreads)
    kan_operand(float* __restrict__ operand, float* __restrict__ saved_input,
                const float* __restrict__ parts, int part_count, std::size_t part_stride,
                std::size_t rows, int in, Grid grid) {
  extern __shared__ float tile[];
  const int nb = grid.basis_count();
  const int stride = tile_stride(nb);
  const std::size_t k_width = static_cast<std::size_t>(in) * (1 + nb);
  const int i0 = blockIdx.x * kThreads;
  const int i = i0 + static_cast<int>(threadIdx.x);
  const int count = min(kThreads, in - i0);
  for (std::size_t row = blockIdx.y; row < rows; row += gridDim.y) {
    if (i < in) {
      const std::size_t at = row * in + i;
      float a = parts[at];
      for (int s = 1; s < part_count; ++s) a += parts[s * part_stride + at];
      if (saved_input != nullptr) saved_input[at] = a;
      const float u = squash(tanhf(a), grid);
      operand[row * k_width + i] = silu(u);
      float value[kOrder + 1];
      const int first = local_bases<kOrder>(u, grid, value, nullptr);
      float* mine = tile + threadIdx.x * stride;
      for (int m = 0; m < nb; ++m) mine[m] = 0.0f;
#pragma unroll
      for (int r = 0; r <= kOrder; ++r) {
        const int m = first + r;
        if (m >= 0 && m < nb) mine[m] = value[r];
      }
    }
    __syncthreads();
    float* out = operand + row * k_width + in + static_cast<std::size_t>(i0) * nb;
    for (int e = threadIdx.x; e < count * nb; e += kThreads)
      out[e] = tile[(e / nb) * stride + e % nb];
    __syncthreads();
  }
}

template <int kOrder>
void launch(float* operand, float* saved_input, const float* parts, std::size_t part_count,
            std::size_t part_stride, std::size_t rows, std::size_t in, const Grid& grid,
            cudaStream_t stream) {
  const dim3 blocks(static_cast<unsigned>((in + kThreads - 1) / kThreads),
                    static_cast<unsigned>(rows < kMaxRowBlocks ? rows : kMaxRowBlocks));
  const std::size_t shared = sizeof(float) * kThreads * tile_stride(grid.basis_count());
  kan_operand<kOrder><<<blocks, kThreads, shared, stream>>>(
      operand, saved_input, parts, static_cast<int>(part_count), part_stride, rows,
      static_cast<int>(in), grid);
  RESIDENT_CHECK_LAUNCH("kan_operand");
}

}  // namespace

void launch_kan_operand(float* operand, float* saved_input, const float* parts,
                        std::size_t part_count, std::size_t part_stride, std::size_t rows,
                        std::size_t in, const Grid& grid, cudaStream_t stream) {
  const NvtxRange range("kan/operand");
  if (grid.grid_size < 1 || grid.grid_size > kMaxGridSize)
    throw Error("launch_kan_operand", "invalid argument",
                "grid_size = " + std::to_string(grid.grid_size) + ", allowed [1, " +
                    std::to_string(kMaxGridSize) + "]",
                __FILE__, __LINE__);
  if (part_count < 1 || in < 1 || in > 0x7fffffffu / (1 + kMaxGridSize + kMaxSplineOrder))
    throw Error("launch_kan_operand", "invalid argument",
                "part_count = " + std::to_string(part_count) + ", in = " + std::to_string(in) +
                    " (each >= 1, in * (1 + nb) within int)",
                __FILE__, __LINE__);
  if (rows == 0) return;
  switch (grid.order) {
    case 1:
      return launch<1>(operand, saved_input, parts, part_count, part_stride, rows, in, grid,
                       stream);
    case 2:
      return launch<2>(operand, saved_input, parts, part_count, part_stride, rows, in, grid,
                       stream);
    case 3:
      return launch<3>(operand, saved_input, parts, part_count, part_stride, rows, in, grid,
                       stream);
    case 4:
      return launch<4>(operand, saved_input, parts, part_count, part_stride, rows, in, grid,
                       stream);
    case 5:
      return launch<5>(operand, saved_input, parts, part_count, part_stride, rows, in, grid,
                       stream);
    default:
      throw Error("launch_kan_operand", "invalid argument",
                  "order = " + std::to_string(grid.order) + ", allowed [1, " +
                      std::to_string(kMaxSplineOrder) + "]",
                  __FILE__, __LINE__);
  }
}

}  // namespace resident::kernels::kan
