// Double-DQN regression targets (kernels/rl/dqn/double_dqn_target.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::dqn {

// targets [B] (overwritten):
//   a*_b = first index of the largest q_online_next[b, :] (NaN never wins; all NaN: 0)
//   y_b  = reward_scale * rewards_b + (dones_b ? 0 : discount * q_target_next[b, a*_b])
// discount = gamma^n for n-step returns. q_online_next, q_target_next [B, A] row-major; rewards
// [B]; dones [B] 0/1 (terminal only: a truncated transition bootstraps). Float math in this
// order: reward_scale * reward, discount * q, then the sum (no contraction). One thread per row; deterministic.
void launch_double_dqn_target(float* targets, const float* q_online_next, const float* q_target_next,
                              const float* rewards, const std::uint8_t* dones, std::size_t batch,
                              std::size_t action_count, float discount, float reward_scale,
                              cudaStream_t stream);

}  // namespace resident::kernels::dqn
