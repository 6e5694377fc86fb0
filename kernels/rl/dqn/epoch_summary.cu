// Epoch summary: a single thread. Contract in epoch_summary.h.
#include "kernels/rl/dqn/epoch_summary.h"

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::dqn {

namespace {

__device__ inline std::uint32_t saturate(std::uint64_t v) {
  return v > 0xffffffffull ? 0xffffffffu : static_cast<std::uint32_t>(v);
}

__global__ void epoch_summary(EpochSummary* summary, EpochStatus* status, TrainMetricsState train,
                              EpisodeTrackerState episodes) {
  const float nan = __int_as_float(0x7fc00000);
  const std::uint64_t steps = train.counters[kEpochGradientSteps];
  const float mean_loss =
      steps == 0 ? nan : static_cast<float>(*train.epoch_loss_sum / static_cast<double>(steps));
  const std::uint64_t ever = episodes.counters[kEpisodesCompleted];
  const std::uint64_t count = ever < episodes.ring_capacity ? ever : episodes.ring_capacity;
  double sum = 0.0;
  for (std::uint64_t k = 0; k < count; ++k) sum += static_cast<double>(episodes.recent_returns[k]);
  *summary = {mean_loss, count == 0 ? nan : static_cast<float>(sum / static_cast<double>(count))};
  *status = {saturate(train.counters[kFirstNonFiniteStep]), saturate(ever)};
  *train.epoch_loss_sum = 0.0;
  train.counters[kEpochGradientSteps] = 0;
  episodes.counters[kEpochEpisodes] = 0;
  *episodes.epoch_return_sum = 0.0;
}

}  // namespace

void launch_epoch_summary(EpochSummary* summary, EpochStatus* status,
                          const TrainMetricsState& train, const EpisodeTrackerState& episodes,
                          cudaStream_t stream) {
  const NvtxRange range("dqn/epoch_summary");
  epoch_summary<<<1, 1, 0, stream>>>(summary, status, train, episodes);
  RESIDENT_CHECK_LAUNCH("epoch_summary");
}

}  // namespace resident::kernels::dqn
