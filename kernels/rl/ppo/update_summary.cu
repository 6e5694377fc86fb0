// Per-update means and the episodic-return summary (contract in update_summary.h).
#include "kernels/rl/ppo/update_summary.h"

#include <cmath>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::ppo {

namespace {

__global__ void update_summary(float* update_metrics, EpisodeSummary* summary, float* metric_sums,
                               std::size_t metric_count, std::size_t minibatch_count,
                               const double* return_sum, const unsigned long long* episodes) {
  for (std::size_t m = 0; m < metric_count; ++m) {
    update_metrics[m] = metric_sums[m] / static_cast<float>(minibatch_count);
    metric_sums[m] = 0.0f;
  }
  const unsigned long long count = *episodes;
  EpisodeSummary s;
  s.episodes = static_cast<std::uint32_t>(count);
  s.mean_return = count == 0 ? NAN : static_cast<float>(*return_sum / static_cast<double>(count));
  *summary = s;
}

}  // namespace

void launch_update_summary(float* update_metrics, EpisodeSummary* summary, float* metric_sums,
                           std::size_t metric_count, std::size_t minibatch_count,
                           const double* return_sum, const unsigned long long* episodes,
                           cudaStream_t stream) {
  if (minibatch_count == 0)
    throw Error("launch_update_summary", "invalid argument", "minibatch_count = 0, allowed >= 1",
                __FILE__, __LINE__);
  const NvtxRange range("ppo/update_summary");
  update_summary<<<1, 1, 0, stream>>>(update_metrics, summary, metric_sums, metric_count,
                                      minibatch_count, return_sum, episodes);
  RESIDENT_CHECK_LAUNCH("update_summary");
}

}  // namespace resident::kernels::ppo
