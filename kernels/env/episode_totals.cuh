// The end of the completed-episode reductions (kernels/env/episode_stats.cu,
// kernels/rl/ppo/episode_stats_delta.cu): one block's per-thread partial sums of returns (double)
// and episode counts (64-bit) combined by a fixed shared-memory tree, thread 0 writing both
// totals (overwrite). Deterministic for a given block size. Every thread of the block calls it.
#pragma once

namespace resident::kernels::episode_totals {

template <unsigned Threads>
__device__ inline void write_block_totals(double sum, unsigned long long count,
                                          double* return_sum, unsigned long long* episodes) {
  __shared__ double sums[Threads];
  __shared__ unsigned long long counts[Threads];
  sums[threadIdx.x] = sum;
  counts[threadIdx.x] = count;
  __syncthreads();
  for (unsigned half = Threads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      sums[threadIdx.x] += sums[threadIdx.x + half];
      counts[threadIdx.x] += counts[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    *return_sum = sums[0];
    *episodes = counts[0];
  }
}

}  // namespace resident::kernels::episode_totals
