// The device-side bookkeeping of a supervised training epoch (kernels/data/epoch_metrics.cu):
// the running sum of the step losses, and the epoch's train and validation means. Everything
// stays on the device until the trainer's two ScalarReadbacks.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::data {

// The trainer's device counters (one allocation, zeroed at setup).
struct EpochCounters {
  double loss_sum;           // sum of this epoch's step losses, in step order (fp64)
  std::uint64_t steps;       // train steps done in this epoch (the gather's batch counter)
  std::uint64_t epoch;       // epochs finished (the permutation's Philox draw counter)
  double train_mean;         // last finished epoch: loss_sum / steps (NaN when steps == 0)
  double validation_mean;    // last finished epoch: the validation loss
};

// After a train step: loss_sum = loss_sum + double(*loss); steps += 1. One thread, so the sum's
// order is the steps' order. Capturable.
void launch_accumulate_step_loss(EpochCounters* counters, const float* loss, cudaStream_t stream);

// Finishes an epoch: train_mean = loss_sum / steps (NaN when steps == 0);
//   validation_mean = (sum_b double(batch_losses[b]) * n_b) / validation_windows,
// where batch b < batches holds n_b = batch windows except the last, which holds the rest
// (validation_windows - (batches - 1) * batch), each batch_losses[b] being the mean over that
// batch; the sum runs in b order in fp64 without contraction, so the host-fed mode
// (lib/models/supervised_trainer.cpp) forms the same bits. Then loss_sum = 0, steps = 0,
// epoch += 1. One thread. batches == 0 writes NaN. Throws resident::Error for batch == 0 or,
// when batches > 0, validation_windows outside ((batches - 1) * batch, batches * batch].
void launch_finish_epoch(EpochCounters* counters, const float* batch_losses, std::size_t batches,
                         std::size_t batch, std::size_t validation_windows, cudaStream_t stream);

}  // namespace resident::kernels::data
