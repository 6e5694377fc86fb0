// Reduction of per-env completed-episode accumulators (kernels/env/episode_stats.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels {

// *return_sum = sum over n of double(completed_return_sum[n]) and *episodes = sum of
// completed_episodes[n] (both overwritten), by one block in a fixed order: deterministic, no
// atomics. With `clear`, the per-env accumulators [N] are zeroed by the threads that read them.
void launch_episode_stats(double* return_sum, unsigned long long* episodes,
                          float* completed_return_sum, std::uint32_t* completed_episodes,
                          std::size_t env_count, bool clear, cudaStream_t stream);

}  // namespace resident::kernels
