// The two 8-byte values an epoch reads back (kernels/rl/dqn/epoch_summary.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/rl/dqn/episode_tracker.h"
#include "kernels/rl/dqn/train_metrics.h"

namespace resident::kernels::dqn {

// First readback word.
struct EpochSummary {
  float mean_loss;           // epoch_loss_sum / train steps of the epoch; NaN when none
  float mean_recent_return;  // mean of the last min(R, episodes ever) returns; NaN when none
};

// Second readback word.
struct EpochStatus {
  std::uint32_t first_nonfinite_step;  // counters[kFirstNonFiniteStep], saturated at 2^32 - 1
  std::uint32_t episodes;              // episodes ended ever, saturated at 2^32 - 1
};

static_assert(sizeof(EpochSummary) == 8 && sizeof(EpochStatus) == 8);

// One thread: writes *summary and *status (overwritten) from the accumulators, then clears the
// epoch accumulators (epoch_loss_sum, the epoch step and episode counts, epoch_return_sum). The
// ring mean is summed in fp64 over ring slots 0..count-1 in order. Deterministic.
void launch_epoch_summary(EpochSummary* summary, EpochStatus* status,
                          const TrainMetricsState& train, const EpisodeTrackerState& episodes,
                          cudaStream_t stream);

}  // namespace resident::kernels::dqn
