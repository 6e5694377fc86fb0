// Train-step metrics: one block; threads count non-finite TD errors over a strided share, a
// fixed tree adds the counts, thread 0 updates the accumulators. Contract in train_metrics.h.
#include "kernels/rl/dqn/train_metrics.h"

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::dqn {

namespace {

constexpr unsigned kThreads = 256;

__global__ void train_metrics(TrainMetricsState state, const float* loss, const float* td_errors,
                              std::size_t batch) {
  __shared__ unsigned long long bad[kThreads];
  unsigned long long count = 0;
  for (std::size_t b = threadIdx.x; b < batch; b += kThreads)
    if (!isfinite(td_errors[b])) ++count;
  bad[threadIdx.x] = count;
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) bad[threadIdx.x] += bad[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    std::uint64_t* c = state.counters;
    const std::uint64_t step = c[kGradientSteps] + 1;
    c[kGradientSteps] = step;
    c[kEpochGradientSteps] += 1;
    const float l = *loss;
    *state.epoch_loss_sum += static_cast<double>(l);
    const bool loss_bad = !isfinite(l);
    if (loss_bad) c[kNonFiniteLosses] += 1;
    c[kNonFiniteTdErrors] += bad[0];
    if ((loss_bad || bad[0] != 0) && c[kFirstNonFiniteStep] == 0) c[kFirstNonFiniteStep] = step;
  }
}

}  // namespace

void launch_train_metrics(const TrainMetricsState& state, const float* loss, const float* td_errors,
                          std::size_t batch, cudaStream_t stream) {
  if (batch == 0)
    throw Error("launch_train_metrics", "invalid size", "batch must be >= 1", __FILE__, __LINE__);
  const NvtxRange range("dqn/train_metrics");
  train_metrics<<<1, kThreads, 0, stream>>>(state, loss, td_errors, batch);
  RESIDENT_CHECK_LAUNCH("train_metrics");
}

}  // namespace resident::kernels::dqn
