// GAE(lambda), one thread per environment walking t = T - 1 down to 0 (contract in gae.h).
#include "kernels/rl/ppo/gae.h"

#include <string>

#include "kernels/core/launch_config.h"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels::ppo {

namespace {

constexpr unsigned kThreads = 128;

__global__ void __launch_bounds__(kThreads)
    gae(float* advantages, float* returns, const float* rewards, const float* values,
        const std::uint8_t* terminated, const std::uint8_t* truncated, const float* final_values,
        std::size_t steps, std::size_t env_count, float gamma, float lambda) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const float gamma_lambda = gamma * lambda;
  for (std::size_t n = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
       n < env_count; n += stride) {
    float next_advantage = 0.0f;
    float next_value = values[steps * env_count + n];
    for (std::size_t t = steps; t-- > 0;) {
      const std::size_t i = t * env_count + n;
      const float value = values[i];
      float advantage;
      if (terminated[i] != 0) {
        advantage = rewards[i] - value;
      } else if (truncated[i] != 0) {
        advantage = (rewards[i] + gamma * final_values[i]) - value;
      } else {
        advantage = ((rewards[i] + gamma * next_value) - value) + gamma_lambda * next_advantage;
      }
      advantages[i] = advantage;
      returns[i] = advantage + value;
      next_advantage = advantage;
      next_value = value;
    }
  }
}

}  // namespace

void launch_gae(float* advantages, float* returns, const float* rewards, const float* values,
                const std::uint8_t* terminated, const std::uint8_t* truncated,
                const float* final_values, std::size_t steps, std::size_t env_count, float gamma,
                float lambda, cudaStream_t stream) {
  if (!(gamma >= 0.0f && gamma <= 1.0f) || !(lambda >= 0.0f && lambda <= 1.0f))
    throw Error("launch_gae", "invalid argument",
                "gamma = " + std::to_string(gamma) + ", lambda = " + std::to_string(lambda) +
                    ", both allowed [0, 1]",
                __FILE__, __LINE__);
  if (steps == 0 || env_count == 0) return;
  const NvtxRange range("ppo/gae");
  gae<<<grid_stride_blocks(env_count, kThreads), kThreads, 0, stream>>>(
      advantages, returns, rewards, values, terminated, truncated, final_values, steps,
      env_count, gamma, lambda);
  RESIDENT_CHECK_LAUNCH("gae");
}

}  // namespace resident::kernels::ppo
