// The last pass of the global gradient norm (device code: include from .cu files only). Shared
// by finish_norm (kernels/nn/global_norm.cu) and the clipping AdamW update (kernels/nn/adamw.cu),
// so that both derive the norm and the clip scale from the same partials in the same order and
// get the same bits.
#pragma once

#include <cub/block/block_reduce.cuh>

namespace resident::kernels::global_norm_detail {

constexpr unsigned kFinishThreads = 256;  // blockDim.x of every kernel that calls finish
using FinishSum = cub::BlockReduce<double, kFinishThreads>;

struct NormAndScale {
  float norm;   // sqrt(sum of the partials), rounded once to fp32
  float scale;  // 1 when norm <= max_norm, else max_norm / norm (in fp64), rounded once to fp32
};

// partials [count] fp64 (sum_squares' per-block sums). Thread t sums partials t, t + 256, ... in
// index order, then cub::BlockReduce (a fixed order for the fixed block size) combines the 256
// sums: the result depends on the partials alone. Called by all kFinishThreads threads of a block
// of exactly that size; the result is valid in thread 0 only. Reads only; no atomics.
__device__ __forceinline__ NormAndScale finish(const double* __restrict__ partials, unsigned count,
                                               float max_norm, FinishSum::TempStorage& temp) {
  double sum = 0.0;
  for (unsigned i = threadIdx.x; i < count; i += kFinishThreads) sum += partials[i];
  const double total = FinishSum(temp).Sum(sum);
  const double value = sqrt(total);
  const double limit = max_norm;
  return {static_cast<float>(value), static_cast<float>(value <= limit ? 1.0 : limit / value)};
}

}  // namespace resident::kernels::global_norm_detail
