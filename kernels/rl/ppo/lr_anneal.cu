// Rescales the last AdamW step by the annealing factor (contract in lr_anneal.h).
#include "kernels/rl/ppo/lr_anneal.h"

#include <algorithm>

#include "kernels/core/launch_config.h"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels::ppo {

namespace {

constexpr unsigned kThreads = 256;

__host__ __device__ inline float anneal_factor(std::uint64_t counter,
                                               std::uint64_t minibatches_per_update,
                                               std::uint64_t total_updates) {
  const std::uint64_t update = (counter == 0 ? 0 : counter - 1) / minibatches_per_update;
  const double f = 1.0 - static_cast<double>(update) / static_cast<double>(total_updates);
  return f > 0.0 ? static_cast<float>(f) : 0.0f;
}

__global__ void __launch_bounds__(kThreads)
    lr_anneal(float* params, const float* before, std::size_t n, const std::uint64_t* counter,
              std::uint64_t minibatches_per_update, std::uint64_t total_updates) {
  const float f = anneal_factor(*counter, minibatches_per_update, total_updates);
  if (f == 1.0f) return;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride)
    params[i] = before[i] + f * (params[i] - before[i]);
}

}  // namespace

double lr_anneal_factor(std::uint64_t counter, std::uint64_t minibatches_per_update,
                        std::uint64_t total_updates) {
  return anneal_factor(counter, minibatches_per_update, total_updates);
}

void launch_lr_anneal(float* params, const float* before, std::size_t n,
                      const std::uint64_t* counter, std::uint64_t minibatches_per_update,
                      std::uint64_t total_updates, cudaStream_t stream) {
  if (minibatches_per_update == 0 || total_updates == 0)
    throw Error("launch_lr_anneal", "invalid argument",
                "minibatches_per_update and total_updates must be >= 1", __FILE__, __LINE__);
  if (n == 0) return;
  const NvtxRange range("ppo/lr_anneal");
  lr_anneal<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(
      params, before, n, counter, minibatches_per_update, total_updates);
  RESIDENT_CHECK_LAUNCH("lr_anneal");
}

}  // namespace resident::kernels::ppo
