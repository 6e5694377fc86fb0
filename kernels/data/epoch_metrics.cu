// Epoch bookkeeping kernels (contract in epoch_metrics.h).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/data/epoch_metrics.h"

namespace resident::kernels::data {

namespace {

__global__ void accumulate_step_loss(EpochCounters* counters, const float* loss) {
  counters->loss_sum = __dadd_rn(counters->loss_sum, static_cast<double>(*loss));
  counters->steps += 1;
}

__global__ void finish_epoch(EpochCounters* counters, const float* batch_losses,
                             std::size_t batches, std::size_t batch,
                             std::size_t validation_windows) {
  const double nan = __longlong_as_double(0x7FF8000000000000ll);
  counters->train_mean =
      counters->steps == 0
          ? nan
          : __ddiv_rn(counters->loss_sum, static_cast<double>(counters->steps));
  double sum = 0.0;
  for (std::size_t b = 0; b < batches; ++b) {
    const std::size_t n = b + 1 < batches ? batch : validation_windows - b * batch;
    sum = __dadd_rn(sum, __dmul_rn(static_cast<double>(batch_losses[b]), static_cast<double>(n)));
  }
  counters->validation_mean =
      batches == 0 ? nan : __ddiv_rn(sum, static_cast<double>(validation_windows));
  counters->loss_sum = 0.0;
  counters->steps = 0;
  counters->epoch += 1;
}

}  // namespace

void launch_accumulate_step_loss(EpochCounters* counters, const float* loss,
                                 cudaStream_t stream) {
  accumulate_step_loss<<<1, 1, 0, stream>>>(counters, loss);
  RESIDENT_CHECK_LAUNCH("accumulate_step_loss");
}

void launch_finish_epoch(EpochCounters* counters, const float* batch_losses, std::size_t batches,
                         std::size_t batch, std::size_t validation_windows, cudaStream_t stream) {
  if (batch == 0 || (batches > 0 && (validation_windows <= (batches - 1) * batch ||
                                     validation_windows > batches * batch)))
    throw Error("data::launch_finish_epoch", "invalid argument",
                "batches = " + std::to_string(batches) + ", batch = " + std::to_string(batch) +
                    ", validation_windows = " + std::to_string(validation_windows) +
                    "; allowed batch >= 1 and (batches - 1) * batch < validation_windows <= "
                    "batches * batch",
                __FILE__, __LINE__);
  const NvtxRange range("data/finish_epoch");
  finish_epoch<<<1, 1, 0, stream>>>(counters, batch_losses, batches, batch, validation_windows);
  RESIDENT_CHECK_LAUNCH("finish_epoch");
}

}  // namespace resident::kernels::data
