// The DQN loss head of one training batch in one launch (kernels/rl/dqn/dqn_loss_head.cu):
// double-DQN targets, TD errors, the IS-weighted Huber loss and its gradient in Q.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::dqn {

struct DqnLossHeadInputs {
  const float* q;                  // [B, A] Q(s, .) of the online network
  const float* q_next_online;      // [B, A] Q(s', .) of the online network (picks the action)
  const float* q_next_target;      // [B, A] Q(s', .) of the target network (values it)
  const std::int32_t* actions;     // [B], in [0, A)
  const float* rewards;            // [B]
  const std::uint8_t* dones;       // [B], nonzero: no bootstrap
  const float* is_weights;         // [B] importance weights, or null for 1
};

struct DqnLossHeadOutputs {
  float* td_errors;  // [B] target - Q(s, a), overwritten (NaN for an action outside [0, A))
  float* loss;       // [1] mean over B of w_b * huber(Q(s, a) - target), overwritten
  float* d_q;        // [B, A] d loss / d Q(s, .), overwritten: zero but at the taken action
};

// Per row b, in float with the same operations as the separate kernels it replaces:
//   a* = argmax_a q_next_online[b, a] (NaNs skipped, first of ties; 0 when all are NaN),
//   target = reward_scale * r_b + (done_b ? 0 : discount * q_next_target[b, a*]),
//   td_b = target - q[b, a_b],
//   d_q[b, a_b] = (w_b / B) * clamp(q[b, a_b] - target, -delta, delta), 0 elsewhere.
// The loss sums w_b * huber(q - target) in a fixed order (one block of 256 threads, rows
// strided by thread, then a block tree) and divides by B. Deterministic. Outputs may not alias
// the inputs. Throws on batch or action_count 0 and on delta <= 0 or not finite.
void launch_dqn_loss_head(const DqnLossHeadOutputs& out, const DqnLossHeadInputs& in,
                          std::size_t batch, std::size_t action_count, float discount,
                          float reward_scale, float delta, cudaStream_t stream);

}  // namespace resident::kernels::dqn
