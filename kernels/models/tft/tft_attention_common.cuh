// Shared pieces of TFT's attention kernels (tft_attention.h): the block size and a fixed-order
// block reduction.
#pragma once

#include <string>

#include "kernels/core/error.h"
#include "kernels/models/tft/tft_attention.h"

namespace resident::kernels::tft::detail {

// The smallest power of two >= max(steps, hidden, 32): one thread per step, and per column.
inline unsigned attention_threads(const AttentionShape& s) {
  unsigned n = 32;
  while (n < s.steps || n < s.hidden) n *= 2;
  return n;
}

inline void check_attention(const char* call, const AttentionShape& s) {
  if (s.batch == 0 || s.batch > 2147483647u || s.steps == 0 || s.steps > 1024 || s.hidden == 0 ||
      s.hidden > 1024 || s.heads == 0 || s.hidden % s.heads != 0 || s.query_step >= s.steps)
    throw Error(call, "invalid argument",
                "batch = " + std::to_string(s.batch) + ", steps = " + std::to_string(s.steps) +
                    ", hidden = " + std::to_string(s.hidden) + ", heads = " +
                    std::to_string(s.heads) + ", query_step = " + std::to_string(s.query_step) +
                    "; allowed batch >= 1, steps and hidden in [1, 1024], heads dividing hidden, "
                    "query_step < steps",
                __FILE__, __LINE__);
}

// The sum (or maximum) of value over the block's threads, in a fixed tree order; every thread
// gets the result. scratch [blockDim.x]; blockDim.x a power of two.
template <bool Max>
__device__ inline float block_reduce(float value, float* scratch) {
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      const float other = scratch[threadIdx.x + half];
      const float mine = scratch[threadIdx.x];
      scratch[threadIdx.x] = Max ? fmaxf(mine, other) : mine + other;
    }
    __syncthreads();
  }
  const float result = scratch[0];
  __syncthreads();
  return result;
}

}  // namespace resident::kernels::tft::detail
