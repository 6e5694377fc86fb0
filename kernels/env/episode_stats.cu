// Completed-episode statistics of a vectorized environment: one block of kThreads threads;
// thread t sums envs t, t + kThreads, ... in order (returns in double, counts in 64-bit), then a
// fixed shared-memory tree combines the threads. Overwrites the two scalars; optionally zeroes
// the per-env accumulators [N]. Deterministic for a given N.
#include "kernels/env/episode_stats.h"

#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr unsigned kThreads = 256;

__global__ void episode_stats(double* return_sum, unsigned long long* episodes,
                              float* completed_return_sum, std::uint32_t* completed_episodes,
                              std::size_t env_count, bool clear) {
  __shared__ double sums[kThreads];
  __shared__ unsigned long long counts[kThreads];
  double sum = 0.0;
  unsigned long long count = 0;
  for (std::size_t n = threadIdx.x; n < env_count; n += kThreads) {
    sum += static_cast<double>(completed_return_sum[n]);
    count += completed_episodes[n];
    if (clear) {
      completed_return_sum[n] = 0.0f;
      completed_episodes[n] = 0;
    }
  }
  sums[threadIdx.x] = sum;
  counts[threadIdx.x] = count;
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
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

}  // namespace

void launch_episode_stats(double* return_sum, unsigned long long* episodes,
                          float* completed_return_sum, std::uint32_t* completed_episodes,
                          std::size_t env_count, bool clear, cudaStream_t stream) {
  const NvtxRange range("env/episode_stats");
  episode_stats<<<1, kThreads, 0, stream>>>(return_sum, episodes, completed_return_sum,
                                            completed_episodes, env_count, clear);
  RESIDENT_CHECK_LAUNCH("episode_stats");
}

}  // namespace resident::kernels
