// Device-side accumulators of the train steps (kernels/rl/dqn/train_metrics.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::dqn {

// Indices into TrainMetricsState::counters.
inline constexpr std::size_t kGradientSteps = 0;        // train steps, ever
inline constexpr std::size_t kEpochGradientSteps = 1;   // train steps since the epoch summary
inline constexpr std::size_t kNonFiniteLosses = 2;      // steps whose loss was not finite, ever
inline constexpr std::size_t kNonFiniteTdErrors = 3;    // TD errors that were not finite, ever
inline constexpr std::size_t kFirstNonFiniteStep = 4;   // 1-based train step of the first of
                                                        // either; 0: none yet
inline constexpr std::size_t kTrainCounterCount = 5;

struct TrainMetricsState {
  double* epoch_loss_sum = nullptr;   // [1] losses since the epoch summary (fp64)
  std::uint64_t* counters = nullptr;  // [kTrainCounterCount]
};

// After one train step with the loss scalar [1] and td_errors [B]: counts the non-finite TD
// errors, then (one thread, in order) counters[kGradientSteps] += 1, the epoch step count += 1,
// epoch_loss_sum += loss, the non-finite counts, and the first non-finite step when this is it.
// One block; deterministic.
void launch_train_metrics(const TrainMetricsState& state, const float* loss, const float* td_errors,
                          std::size_t batch, cudaStream_t stream);

}  // namespace resident::kernels::dqn
