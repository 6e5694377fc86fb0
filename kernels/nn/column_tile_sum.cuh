// Deterministic column sums of a row-major [rows, cols] matrix in ONE launch, no atomics, no
// global scratch. The grid is [tiles, slices]: block (t, s) owns a tile of `width` columns (a
// power of two <= 32) and the rows s * groups + g + k * groups * slices of them, its threads
// forming `groups` = kThreads / width row groups (group g of the block walks its rows in order).
// A block adds its groups' partials pairwise in shared memory (a fixed tree); the `slices` blocks
// of a tile form one thread-block cluster (sm_90), and the cluster's rank-0 block adds the
// slices' partials through distributed shared memory in rank order. Every order depends on
// (rows, cols) alone, so results are the same bits on every run.
//
// The value summed at (r, c) comes from a functor with `load(r, c)` (the global reads, any
// type) and `apply(r, c, loaded)` (returns the float to add; may write an output, as the fused
// activation backward does). Each thread issues the loads of 16 of its rows before applying any of
// them, so an output may alias an input element for element (dz over da) without __restrict__. Tall matrices get up to kMaxSlices slices per tile, and
// tiles no narrower than 8 columns (a 32-byte sector per row), so that the PPO minibatch shape
// (131072 x 64) spreads over 64 blocks instead of walking all rows in a few.
#pragma once

#include <cooperative_groups.h>

#include <cstddef>
#include <utility>

#include "kernels/nn/row_reduce.cuh"
#include "kernels/core/error.h"

namespace resident::kernels::column_tile {

inline constexpr unsigned kThreads = 512;
inline constexpr unsigned kMaxSlices = 16;         // a non-portable cluster size (sm_90: 16)
inline constexpr unsigned kPortableSlices = 8;
inline constexpr std::size_t kRowsPerThread = 16;  // a slice is added only past this

struct Shape {
  unsigned width;   // columns per block, a power of two in [1, 32]
  unsigned tiles;   // ceil(cols / width): gridDim.x
  unsigned slices;  // row slices per tile in [1, kMaxSlices]: gridDim.y and the cluster size
};

// The tile of a [rows, cols] column sum (host side).
inline Shape shape_for(std::size_t rows, std::size_t cols) {
  unsigned width = 1;
  while (width < 32 && width < cols) width *= 2;
  const auto tiles = [&](unsigned w) { return static_cast<unsigned>((cols + w - 1) / w); };
  // Narrow the tiles (down to 8 columns) while a tall matrix would fill too few blocks.
  while (width > 8 && tiles(width) * kMaxSlices < 128 && rows / (kThreads / width) > kRowsPerThread)
    width /= 2;
  const std::size_t rows_per_slice = std::size_t{kThreads / width} * kRowsPerThread;
  std::size_t slices = (rows + rows_per_slice - 1) / rows_per_slice;
  slices = slices < 1 ? 1 : (slices > kMaxSlices ? kMaxSlices : slices);
  return {width, tiles(width), static_cast<unsigned>(slices)};
}

// Launches kernel<<<[tiles, slices], kThreads>>> with clusters of (1, slices, 1); a launch error
// throws resident::Error naming cudaLaunchKernelEx.
template <typename... KernelArgs, typename... Args>
void launch(const Shape& shape, cudaStream_t stream, void (*kernel)(KernelArgs...),
            Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(shape.tiles, shape.slices, 1);
  config.blockDim = dim3(kThreads, 1, 1);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 1;
  cluster.val.clusterDim.y = shape.slices;
  cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  if (shape.slices > kPortableSlices)  // host-side attribute, no stream work: capture-safe
    RESIDENT_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  RESIDENT_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// Sums value(r, c) over r for the block's columns; returns the column's total in the threads
// (group 0, lane) of the tile's slice-0 block for column `c`, valid when `c < cols` (every other
// thread returns 0). Every thread of the block must call it (it synchronizes the cluster).
template <typename Value>
__device__ inline float sum_block_columns(std::size_t rows, std::size_t cols, unsigned width,
                                          Value&& value, std::size_t& column) {
  __shared__ float partial[kThreads];
  const unsigned lane = threadIdx.x % width;
  const unsigned group = threadIdx.x / width;
  const unsigned groups = kThreads / width;
  const unsigned slices = gridDim.y;
  column = std::size_t{blockIdx.x} * width + lane;
  float sum = 0.0f;
  if (column < cols) {
    constexpr unsigned kBatch = 16;
    const std::size_t stride = std::size_t{groups} * slices;
    for (std::size_t first = std::size_t{blockIdx.y} * groups + group; first < rows;
         first += kBatch * stride) {
      decltype(value.load(first, column)) loaded[kBatch];
#pragma unroll
      for (unsigned k = 0; k < kBatch; ++k) {
        const std::size_t r = first + k * stride;
        if (r < rows) loaded[k] = value.load(r, column);
      }
#pragma unroll
      for (unsigned k = 0; k < kBatch; ++k) {
        const std::size_t r = first + k * stride;
        if (r < rows) sum += value.apply(r, column, loaded[k]);
      }
    }
  }
  partial[threadIdx.x] = sum;
  for (unsigned half = groups / 2; half > 0; half /= 2) {
    __syncthreads();
    if (group < half) partial[threadIdx.x] += partial[threadIdx.x + half * width];
  }
  __syncthreads();
  if (slices == 1) return group == 0 ? partial[threadIdx.x] : 0.0f;
  // partial[0, width) holds this slice's sums; rank 0 adds the slices' in rank order.
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  cluster.sync();
  float total = 0.0f;
  if (cluster.block_rank() == 0 && group == 0) {
    for (unsigned rank = 0; rank < slices; ++rank) total += cluster.map_shared_rank(partial, rank)[lane];
  }
  cluster.sync();  // the other blocks' shared memory stays alive until rank 0 has read it
  return total;
}

}  // namespace resident::kernels::column_tile
