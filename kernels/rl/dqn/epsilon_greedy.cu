// Epsilon-greedy: one thread per env (grid-stride). Contract in epsilon_greedy.h.
#include "kernels/rl/dqn/epsilon_greedy.h"

#include "kernels/core/launch_config.h"
#include "kernels/rl/dqn/epsilon_greedy_action.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::dqn {

namespace {

__global__ void epsilon_greedy(std::int32_t* actions, const float* q_values, std::size_t env_count,
                               std::size_t action_count, EpsilonSchedule schedule,
                               const std::uint64_t* vector_step, std::uint64_t philox_seed) {
  const std::uint64_t step = *vector_step;
  const double epsilon = epsilon_at(schedule, step * env_count);
  for (std::size_t n = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
       n < env_count; n += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::int32_t action = epsilon_greedy_action(q_values + n * action_count, action_count,
                                                      epsilon, philox_seed, step, n);
    actions[n] = action;
  }
}

}  // namespace

void launch_epsilon_greedy(std::int32_t* actions, const float* q_values, std::size_t env_count,
                           std::size_t action_count, const EpsilonSchedule& schedule,
                           const std::uint64_t* vector_step, std::uint64_t philox_seed,
                           cudaStream_t stream) {
  if (env_count == 0 || action_count == 0)
    throw Error("launch_epsilon_greedy", "invalid size",
                "env_count and action_count must be >= 1", __FILE__, __LINE__);
  const NvtxRange range("dqn/epsilon_greedy");
  constexpr unsigned kBlock = 128;
  epsilon_greedy<<<grid_stride_blocks(env_count, kBlock), kBlock, 0, stream>>>(
      actions, q_values, env_count, action_count, schedule, vector_step, philox_seed);
  RESIDENT_CHECK_LAUNCH("epsilon_greedy");
}

}  // namespace resident::kernels::dqn
