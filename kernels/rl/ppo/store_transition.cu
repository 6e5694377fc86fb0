// Stores one environment step into the rollout (contract in store_transition.h).
#include "kernels/rl/ppo/store_transition.h"

#include "kernels/core/launch_config.h"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::ppo {

namespace {

constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    store_transition(TransitionStore store, EnvStepOutputs step, std::size_t env_count,
                     std::size_t observation_size, std::size_t steps,
                     const std::uint64_t* step_slot, std::uint64_t* counter) {
  const std::uint64_t index = *step_slot;
  const std::size_t t = static_cast<std::size_t>(index % steps);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t components = env_count * observation_size;
  for (std::size_t i = first; i < components; i += stride) {
    store.final_observations[t * components + i] = step.final_observations[i];
    store.observations[(t + 1) * components + i] = step.observations[i];
  }
  for (std::size_t n = first; n < env_count; n += stride) {
    store.rewards[t * env_count + n] = step.rewards[n];
    store.terminated[t * env_count + n] = step.terminated[n];
    store.truncated[t * env_count + n] = step.truncated[n];
  }
  if (first == 0) *counter = index + 1;
}

}  // namespace

void launch_store_transition(TransitionStore store, EnvStepOutputs step, std::size_t env_count,
                             std::size_t observation_size, std::size_t steps,
                             const std::uint64_t* step_slot, std::uint64_t* counter,
                             cudaStream_t stream) {
  if (env_count == 0 || observation_size == 0 || steps == 0)
    throw Error("launch_store_transition", "invalid argument",
                "env_count, observation_size and steps must be >= 1", __FILE__, __LINE__);
  const NvtxRange range("ppo/store_transition");
  store_transition<<<grid_stride_blocks(env_count * observation_size, kThreads), kThreads, 0,
                     stream>>>(store, step, env_count, observation_size, steps, step_slot,
                               counter);
  RESIDENT_CHECK_LAUNCH("store_transition");
}

}  // namespace resident::kernels::ppo
