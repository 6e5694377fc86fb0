// Completed-episode statistics of a vectorized environment: one block of kThreads threads;
// thread t sums envs t, t + kThreads, ... in order (returns in double, counts in 64-bit), then a
// fixed shared-memory tree combines the threads. Overwrites the two scalars; optionally zeroes
// the per-env accumulators [N]. Deterministic for a given N.
#include "kernels/env/episode_stats.h"

#include "kernels/env/episode_totals.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr unsigned kThreads = 256;

__global__ void episode_stats(double* return_sum, unsigned long long* episodes,
                              float* completed_return_sum, std::uint32_t* completed_episodes,
                              std::size_t env_count, bool clear) {
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
  episode_totals::write_block_totals<kThreads>(sum, count, return_sum, episodes);
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
