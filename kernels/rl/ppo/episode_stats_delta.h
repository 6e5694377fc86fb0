// Episode statistics of an environment whose per-env episode sums are cumulative (they only grow,
// e.g. lib/env's TradingEnv): the episodes ended since the previous call, from the difference
// against a device snapshot (kernels/rl/ppo/episode_stats_delta.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::ppo {

// Cumulative per-env sums [N] (read only): cumulative_return[n] the float sum of env n's ended
// episodes' returns, cumulative_count[n] their count. Snapshots [N] (read, then overwritten with
// the current sums): the values at the previous call (zero them together with the env's sums).
// Outputs, overwritten:
//   *return_sum = sum over n of (double(cumulative_return[n]) - double(snapshot_return[n]))
//   *episodes   = sum over n of uint32(cumulative_count[n] - snapshot_count[n])  (mod 2^32 per env)
// Each float difference is exact in double unless the two values differ by more than 2^29 in
// ratio; the cumulative float sums themselves round at every added episode (the env's doing).
// One block; thread t takes envs t, t + 256, ... in order, then a fixed tree: deterministic for a
// given N, no atomics. The snapshots must not alias the cumulative sums. Capturable.
void launch_episode_stats_delta(double* return_sum, unsigned long long* episodes,
                                float* snapshot_return, std::uint32_t* snapshot_count,
                                const float* cumulative_return,
                                const std::uint32_t* cumulative_count, std::size_t env_count,
                                cudaStream_t stream);

}  // namespace resident::kernels::ppo
