// Minibatch gather through the device permutation (contract in gather_minibatch.h).
#include "kernels/rl/ppo/gather_minibatch.h"

#include "kernels/core/launch_config.h"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::ppo {

namespace {

constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    gather_minibatch(Minibatch out, SampleArrays samples, const std::uint32_t* permutation,
                     std::size_t batch, std::size_t observation_size, std::size_t minibatches,
                     const std::uint64_t* counter) {
  const std::size_t base = static_cast<std::size_t>(*counter % minibatches) * batch;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  for (std::size_t k = first; k < batch * observation_size; k += stride) {
    const std::size_t i = k / observation_size, d = k % observation_size;
    const std::size_t j = permutation[base + i];
    out.observations[k] = samples.observations[j * observation_size + d];
  }
  for (std::size_t i = first; i < batch; i += stride) {
    const std::size_t j = permutation[base + i];
    out.actions[i] = samples.actions[j];
    out.log_prob[i] = samples.log_prob[j];
    out.advantages[i] = samples.advantages[j];
    out.returns[i] = samples.returns[j];
    out.values[i] = samples.values[j];
  }
}

}  // namespace

void launch_gather_minibatch(Minibatch out, SampleArrays samples, const std::uint32_t* permutation,
                             std::size_t batch, std::size_t observation_size,
                             std::size_t minibatches, const std::uint64_t* counter,
                             cudaStream_t stream) {
  if (batch == 0 || observation_size == 0 || minibatches == 0)
    throw Error("launch_gather_minibatch", "invalid argument",
                "batch, observation_size and minibatches must be >= 1", __FILE__, __LINE__);
  const NvtxRange range("ppo/gather_minibatch");
  gather_minibatch<<<grid_stride_blocks(batch * observation_size, kThreads), kThreads, 0,
                     stream>>>(out, samples, permutation, batch, observation_size, minibatches,
                               counter);
  RESIDENT_CHECK_LAUNCH("gather_minibatch");
}

}  // namespace resident::kernels::ppo
