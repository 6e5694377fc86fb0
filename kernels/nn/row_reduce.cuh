// Deterministic building blocks of the nn kernels (device code: include from .cu files only).
//
// Row groups. A row-wise kernel hands each row of [rows, cols] to a group of threads chosen by
// the row length alone (for_row_group): kWidth lanes of one warp (WarpGroup, kWidth 4, 8, 16 or
// 32) for cols <= 1024, a whole block (BlockGroup) beyond. Every block has kRowThreads threads.
// Thread `rank()` of a group owns columns rank, rank + size, ... in both the reading and the
// writing pass of a kernel, so an output may alias the input it is computed from.
//
// all_reduce combines one value per thread in a fixed order (a butterfly of shuffles inside a
// warp, then the warps' values in warp order) and returns the same bits to every thread of the
// group: the ops below are commutative bit for bit (no FMA contraction inside them). Results
// depend on the row length only, never on timing, grid size or the GPU. No atomics anywhere.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstddef>
#include <string>

#include "kernels/core/error.h"

// Throws resident::Error(op, "invalid argument", detail) at the caller's file:line.
#define RESIDENT_ROWWISE_REQUIRE(condition, op, detail)                                \
  do {                                                                                 \
    if (!(condition))                                                                  \
      throw ::resident::Error((op), "invalid argument", (detail), __FILE__, __LINE__); \
  } while (0)

namespace resident::kernels::rowwise {

inline constexpr unsigned kRowThreads = 256;  // threads per block of every nn kernel here

// Overwrite never reads `out`.
__device__ inline void write_grad(float* out, float value, bool accumulate) {
  *out = accumulate ? *out + value : value;
}

// A running maximum and the sum of e^(x - max) over the values seen (online softmax).
struct MaxSum {
  float max;
  float sum;
};

__device__ inline MaxSum max_sum_add(MaxSum acc, float x) {
  if (x > acc.max) {
    acc.sum = acc.sum * expf(acc.max - x) + 1.0f;  // e^(-inf) = 0 for the first value
    acc.max = x;
  } else {
    acc.sum += expf(x - acc.max);  // a NaN input lands here and poisons the sum
  }
  return acc;
}

__device__ inline float shfl_xor(unsigned lanes, float v, int lane_mask, int width) {
  return __shfl_xor_sync(lanes, v, lane_mask, width);
}
__device__ inline float2 shfl_xor(unsigned lanes, float2 v, int lane_mask, int width) {
  return make_float2(__shfl_xor_sync(lanes, v.x, lane_mask, width),
                     __shfl_xor_sync(lanes, v.y, lane_mask, width));
}
__device__ inline MaxSum shfl_xor(unsigned lanes, MaxSum v, int lane_mask, int width) {
  return {__shfl_xor_sync(lanes, v.max, lane_mask, width),
          __shfl_xor_sync(lanes, v.sum, lane_mask, width)};
}

struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
  __device__ float2 operator()(float2 a, float2 b) const {
    return make_float2(a.x + b.x, a.y + b.y);
  }
};

struct MaxSumCombine {
  __device__ MaxSum operator()(MaxSum a, MaxSum b) const {
    const float max = fmaxf(a.max, b.max);
    if (max == -INFINITY) return {max, 0.0f};  // both empty
    return {max,
            __fadd_rn(__fmul_rn(a.sum, expf(a.max - max)), __fmul_rn(b.sum, expf(b.max - max)))};
  }
};

// kWidth consecutive lanes of one warp per row; kRowThreads / kWidth rows per block.
template <unsigned kWidth>
struct WarpGroup {
  static_assert(kWidth >= 2 && kWidth <= 32 && (kWidth & (kWidth - 1)) == 0,
                "a warp group is a power of two of lanes, at most a warp");
  static constexpr unsigned kRowsPerBlock = kRowThreads / kWidth;

  static std::size_t blocks(std::size_t rows) { return (rows + kRowsPerBlock - 1) / kRowsPerBlock; }
  __device__ static std::size_t row() {
    return blockIdx.x * std::size_t{kRowsPerBlock} + threadIdx.x / kWidth;
  }
  __device__ static unsigned rank() { return threadIdx.x % kWidth; }
  __device__ static constexpr unsigned size() { return kWidth; }

  // Only the group's own lanes take part, so a group whose row is out of range may return early.
  template <class T, class Op>
  __device__ static T all_reduce(T value, Op op) {
    unsigned lanes = 0xffffffffu;
    if constexpr (kWidth < 32)
      lanes = ((1u << kWidth) - 1u) << (threadIdx.x % 32u / kWidth * kWidth);
    for (unsigned offset = kWidth / 2; offset > 0; offset /= 2)
      value = op(value, shfl_xor(lanes, value, static_cast<int>(offset), static_cast<int>(kWidth)));
    return value;
  }
};

// A whole block (kRowThreads threads) per row. Every thread must call all_reduce.
struct BlockGroup {
  static std::size_t blocks(std::size_t rows) { return rows; }
  __device__ static std::size_t row() { return blockIdx.x; }
  __device__ static unsigned rank() { return threadIdx.x; }
  __device__ static constexpr unsigned size() { return kRowThreads; }

  template <class T, class Op>
  __device__ static T all_reduce(T value, Op op) {
    constexpr unsigned kWarps = kRowThreads / 32;
    __shared__ T warp_values[kWarps];
    for (unsigned offset = 16; offset > 0; offset /= 2)
      value = op(value, shfl_xor(0xffffffffu, value, static_cast<int>(offset), 32));
    __syncthreads();  // every thread has read warp_values of an earlier call
    if (threadIdx.x % 32 == 0) warp_values[threadIdx.x / 32] = value;
    __syncthreads();
    T total = warp_values[0];
    for (unsigned w = 1; w < kWarps; ++w) total = op(total, warp_values[w]);
    return total;
  }
};

// Calls launch(Group{}) with the row group for rows of `cols` columns.
template <class Launch>
void for_row_group(std::size_t cols, Launch&& launch) {
  if (cols <= 4) {
    launch(WarpGroup<4>{});
  } else if (cols <= 8) {
    launch(WarpGroup<8>{});
  } else if (cols <= 16) {
    launch(WarpGroup<16>{});
  } else if (cols <= 1024) {
    launch(WarpGroup<32>{});
  } else {
    launch(BlockGroup{});
  }
}

// A grid size for a launch, or a throw when it exceeds the grid's x limit.
inline unsigned grid_size(std::size_t blocks, const char* op) {
  RESIDENT_ROWWISE_REQUIRE(blocks <= static_cast<std::size_t>(INT_MAX), op,
                           "needs " + std::to_string(blocks) + " blocks, more than a grid holds");
  return static_cast<unsigned>(blocks);
}

// Grid of a grid-stride elementwise kernel over n elements.
inline unsigned elementwise_grid(std::size_t n) {
  const std::size_t blocks = (n + kRowThreads - 1) / kRowThreads;
  return static_cast<unsigned>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

}  // namespace resident::kernels::rowwise
