// Transition assembly: one thread per (env, feature) element (grid-stride). Contract in
// transition_assembly.h.
#include "kernels/rl/dqn/transition_assembly.h"

#include "kernels/core/launch_config.h"
#include "kernels/core/programmatic_launch.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::dqn {

namespace {

__global__ void transition_assembly(TransitionOutputs out, TransitionSources in,
                                    std::size_t env_count, std::size_t observation_size) {
  allow_next_kernel_to_start();
  wait_for_prior_kernel();  // launched after the env step (launch_after_prior)
  const std::size_t total = env_count * observation_size;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t n = i / observation_size;
    // Every load before the first store: a store might alias a later load for all the compiler
    // knows (the contract says none does), so interleaved they waited one round trip each.
    const bool terminated = in.terminated != nullptr && in.terminated[n] != 0;
    const bool truncated = in.truncated != nullptr && in.truncated[n] != 0;
    const float state = out.current_observations[i];
    const float next_observation = in.next_observations[i];
    const float final_observation =
        in.final_observations != nullptr ? in.final_observations[i] : next_observation;
    const float observation = in.observations[i];
    out.states[i] = state;
    out.next_states[i] = terminated || truncated ? final_observation : next_observation;
    out.current_observations[i] = observation;
    if (i - n * observation_size == 0) out.dones[n] = terminated ? 1 : 0;
  }
}

}  // namespace

void launch_transition_assembly(const TransitionOutputs& outputs, const TransitionSources& sources,
                                std::size_t env_count, std::size_t observation_size,
                                cudaStream_t stream) {
  if (env_count == 0 || observation_size == 0)
    throw Error("launch_transition_assembly", "invalid size",
                "env_count and observation_size must be >= 1", __FILE__, __LINE__);
  const NvtxRange range("dqn/transition_assembly");
  constexpr unsigned kBlock = 256;
  launch_after_prior({dim3(grid_stride_blocks(env_count * observation_size, kBlock)), dim3(kBlock)},
                     stream, transition_assembly, outputs, sources, env_count, observation_size);
  RESIDENT_CHECK_LAUNCH("transition_assembly");
}

}  // namespace resident::kernels::dqn
