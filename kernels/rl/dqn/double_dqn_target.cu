// Double-DQN targets: one thread per sampled row (grid-stride). Contract in double_dqn_target.h.
#include "kernels/rl/dqn/double_dqn_target.h"

#include "kernels/core/launch_config.h"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels::dqn {

namespace {

__global__ void double_dqn_target(float* targets, const float* q_online_next,
                                  const float* q_target_next, const float* rewards,
                                  const std::uint8_t* dones, std::size_t batch,
                                  std::size_t action_count, float discount, float reward_scale) {
  for (std::size_t b = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; b < batch;
       b += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float* q = q_online_next + b * action_count;
    std::size_t best_a = 0;
    bool found = false;
    float best = 0.0f;
    for (std::size_t a = 0; a < action_count; ++a) {
      const float v = q[a];
      if (v == v && (!found || v > best)) {
        best = v;
        best_a = a;
        found = true;
      }
    }
    const float bootstrap =
        dones[b] != 0 ? 0.0f : __fmul_rn(discount, q_target_next[b * action_count + best_a]);
    targets[b] = __fadd_rn(__fmul_rn(reward_scale, rewards[b]), bootstrap);
  }
}

}  // namespace

void launch_double_dqn_target(float* targets, const float* q_online_next, const float* q_target_next,
                              const float* rewards, const std::uint8_t* dones, std::size_t batch,
                              std::size_t action_count, float discount, float reward_scale,
                              cudaStream_t stream) {
  if (batch == 0 || action_count == 0)
    throw Error("launch_double_dqn_target", "invalid size", "batch and action_count must be >= 1",
                __FILE__, __LINE__);
  const NvtxRange range("dqn/double_dqn_target");
  constexpr unsigned kBlock = 128;
  double_dqn_target<<<grid_stride_blocks(batch, kBlock), kBlock, 0, stream>>>(
      targets, q_online_next, q_target_next, rewards, dones, batch, action_count, discount,
      reward_scale);
  RESIDENT_CHECK_LAUNCH("double_dqn_target");
}

}  // namespace resident::kernels::dqn
