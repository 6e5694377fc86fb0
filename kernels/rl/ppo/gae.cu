// GAE(lambda), one thread per environment walking t = T - 1 down to 0 (contract in gae.h).
#include "kernels/rl/ppo/gae.h"

#include <string>

#include "kernels/core/launch_config.h"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::ppo {

namespace {

constexpr unsigned kThreads = 128;
// Steps whose inputs a thread loads before walking them: the loads do not depend on the
// recurrence, so a batch costs one memory round trip instead of one per step (ncu on the H200:
// 141 us for 128 x 4096, the latency of 128 dependent iterations).
constexpr std::size_t kPrefetch = 8;

__global__ void __launch_bounds__(kThreads)
    gae(float* __restrict__ advantages, float* __restrict__ returns,
        const float* __restrict__ rewards, const float* __restrict__ values,
        const std::uint8_t* __restrict__ terminated, const std::uint8_t* __restrict__ truncated,
        const float* __restrict__ final_values, std::size_t steps, std::size_t env_count,
        float gamma, float lambda) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const float gamma_lambda = gamma * lambda;
  for (std::size_t n = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
       n < env_count; n += stride) {
    float next_advantage = 0.0f;
    float next_value = values[steps * env_count + n];
    // Steps end - 1, end - 2, ..., end - count: loaded first, then walked in that order.
    for (std::size_t end = steps; end > 0;) {
      const std::size_t count = end < kPrefetch ? end : kPrefetch;
      float value[kPrefetch], reward[kPrefetch], final_value[kPrefetch];
      std::uint8_t ended[kPrefetch], cut[kPrefetch];
#pragma unroll
      for (std::size_t q = 0; q < kPrefetch; ++q) {
        if (q >= count) break;
        const std::size_t i = (end - 1 - q) * env_count + n;
        value[q] = values[i];
        reward[q] = rewards[i];
        final_value[q] = final_values[i];
        ended[q] = terminated[i];
        cut[q] = truncated[i];
      }
#pragma unroll
      for (std::size_t q = 0; q < kPrefetch; ++q) {
        if (q >= count) break;
        const std::size_t i = (end - 1 - q) * env_count + n;
        float advantage;
        if (ended[q] != 0) {
          advantage = reward[q] - value[q];
        } else if (cut[q] != 0) {
          advantage = (reward[q] + gamma * final_value[q]) - value[q];
        } else {
          advantage =
              ((reward[q] + gamma * next_value) - value[q]) + gamma_lambda * next_advantage;
        }
        advantages[i] = advantage;
        returns[i] = advantage + value[q];
        next_advantage = advantage;
        next_value = value[q];
      }
      end -= count;
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
