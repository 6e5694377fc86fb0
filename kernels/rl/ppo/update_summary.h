// The end of a PPO update on the device: the scalars the host reads back
// (kernels/rl/ppo/update_summary.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::ppo {

// 8 bytes: one ScalarReadback carries both.
struct EpisodeSummary {
  float mean_return = 0.0f;     // NaN when no episode ended
  std::uint32_t episodes = 0;   // episodes that ended during the rollout
};

// One thread: update_metrics[m] = metric_sums[m] / minibatch_count (overwritten), then
// metric_sums[m] = 0 for m < metric_count; summary = return_sum / episodes (NaN for 0).
// Capturable.
void launch_update_summary(float* update_metrics, EpisodeSummary* summary, float* metric_sums,
                           std::size_t metric_count, std::size_t minibatch_count,
                           const double* return_sum, const unsigned long long* episodes,
                           cudaStream_t stream);

}  // namespace resident::kernels::ppo
