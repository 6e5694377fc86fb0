// Episode statistics from cumulative per-env sums (contract in episode_stats_delta.h).
#include "kernels/rl/ppo/episode_stats_delta.h"

#include "kernels/env/episode_totals.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::ppo {

namespace {

constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    episode_stats_delta(double* return_sum, unsigned long long* episodes, float* snapshot_return,
                        std::uint32_t* snapshot_count, const float* cumulative_return,
                        const std::uint32_t* cumulative_count, std::size_t env_count) {
  double sum = 0.0;
  unsigned long long count = 0;
  for (std::size_t n = threadIdx.x; n < env_count; n += kThreads) {
    const float current_return = cumulative_return[n];
    const std::uint32_t current_count = cumulative_count[n];
    sum += static_cast<double>(current_return) - static_cast<double>(snapshot_return[n]);
    count += static_cast<std::uint32_t>(current_count - snapshot_count[n]);
    snapshot_return[n] = current_return;
    snapshot_count[n] = current_count;
  }
  episode_totals::write_block_totals<kThreads>(sum, count, return_sum, episodes);
}

}  // namespace

void launch_episode_stats_delta(double* return_sum, unsigned long long* episodes,
                                float* snapshot_return, std::uint32_t* snapshot_count,
                                const float* cumulative_return,
                                const std::uint32_t* cumulative_count, std::size_t env_count,
                                cudaStream_t stream) {
  if (env_count == 0)
    throw Error("launch_episode_stats_delta", "invalid argument", "env_count = 0, allowed >= 1",
                __FILE__, __LINE__);
  const NvtxRange range("ppo/episode_stats_delta");
  episode_stats_delta<<<1, kThreads, 0, stream>>>(return_sum, episodes, snapshot_return,
                                                  snapshot_count, cumulative_return,
                                                  cumulative_count, env_count);
  RESIDENT_CHECK_LAUNCH("episode_stats_delta");
}

}  // namespace resident::kernels::ppo
