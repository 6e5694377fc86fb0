// Deterministic column sums of a row-major [rows, cols] matrix in ONE launch, no atomics, no
// scratch: block b owns a tile of `width` columns (a power of two <= 32); its threads form
// `groups` = kColumnTileThreads / width row groups, group g adding rows g, g + groups, ... of its
// column in order, then the groups' partials are added pairwise in shared memory (fixed tree).
// The order depends on (rows, cols) alone, so results are the same bits on every run.
//
// The value summed at (r, c) comes from a functor `value(r, c)` (it may also write an output, as
// the fused activation backward does). The tile width trades coalescing (wide tiles) against the
// number of blocks (narrow tiles) so that tall, narrow matrices still spread over several SMs.
#pragma once

#include <cstddef>

#include "kernels/nn/row_reduce.cuh"

namespace resident::kernels::column_tile {

inline constexpr unsigned kThreads = 512;

struct Shape {
  unsigned width;   // columns per block, a power of two in [1, 32]
  unsigned blocks;  // ceil(cols / width)
};

// The tile of a [rows, cols] column sum (host side).
inline Shape shape_for(std::size_t rows, std::size_t cols) {
  unsigned width = 1;
  while (width < 32 && width < cols) width *= 2;
  // Narrow the tiles while too few blocks would each walk too many rows per thread.
  while (width > 4 && (cols + width - 1) / width < 16 && rows / (kThreads / width) > 32) width /= 2;
  return {width, static_cast<unsigned>((cols + width - 1) / width)};
}

// Sums value(r, c) over r for the block's columns; returns the sum in thread (group 0, lane) for
// column `c`, which is valid when `c < cols` (other threads return 0).
template <typename Value>
__device__ inline float sum_block_columns(std::size_t rows, std::size_t cols, unsigned width,
                                          Value&& value, std::size_t& column) {
  __shared__ float partial[kThreads];
  const unsigned lane = threadIdx.x % width;
  const unsigned group = threadIdx.x / width;
  const unsigned groups = kThreads / width;
  column = std::size_t{blockIdx.x} * width + lane;
  float sum = 0.0f;
  if (column < cols) {
#pragma unroll 4
    for (std::size_t r = group; r < rows; r += groups) sum += value(r, column);
  }
  partial[threadIdx.x] = sum;
  for (unsigned half = groups / 2; half > 0; half /= 2) {
    __syncthreads();
    if (group < half) partial[threadIdx.x] += partial[threadIdx.x + half * width];
  }
  __syncthreads();
  return group == 0 ? partial[threadIdx.x] : 0.0f;
}

}  // namespace resident::kernels::column_tile
