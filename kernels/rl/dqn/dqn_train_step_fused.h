// The whole DQN gradient step in one cooperative (grid-synchronized) kernel
// (kernels/rl/dqn/dqn_train_step_fused.cu): the online network's forward over [states;
// next_states] and the target network's over next_states, the double-DQN loss head (targets, TD
// errors, the IS-weighted Huber loss and its gradient), the online backward, global-norm clip and
// AdamW over the online slab, and the target update. The same phases as the fused MLP step
// (kernels/nn/fused_step_phases.cuh) with a DQN head; on the GEMM path this is ~30 launches.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/nn/mlp_train_step_fused.h"

namespace resident::kernels::dqn {

struct DqnFusedBatch {
  const float* states = nullptr;           // [2B, obs]: B states, then their B next states
  const std::int32_t* actions = nullptr;   // [B], in [0, A)
  const float* rewards = nullptr;          // [B]
  const std::uint8_t* dones = nullptr;     // [B], nonzero: no bootstrap
  const float* is_weights = nullptr;       // [B] importance weights, or null for 1
};

struct DqnFusedTarget {
  FusedStepMlp network;      // the target network's weights and biases (its grad views unused)
  FusedStepScratch scratch;  // its pre_activations and activations [B, hidden] (the rest unused)
  float* params = nullptr;   // the target slab's params [optimizer.n], the online slab's layout
  float tau = 1.0f;          // (0, 1]: 1 copies, else Polyak
  std::uint64_t period = 1;  // >= 1: update when the advanced step counter % period == 0
};

struct DqnFusedOutputs {
  float* td_errors = nullptr;  // [B] target - Q(s, a), overwritten
  float* loss = nullptr;       // [1] mean over B of w_b huber(Q(s, a) - target)
};

struct DqnFusedConstants {
  float discount = 0.99f;
  float reward_scale = 1.0f;
  float delta = 1.0f;  // Huber threshold, finite and > 0
};

// Floats of the loss partials of a step on B rows (online_scratch.loss_partials): one per 2-row
// tile of the head phase.
std::size_t dqn_fused_step_loss_partials(std::size_t batch) noexcept;

// Whether the forward phase of a layer of `width` outputs hands out the online network's 2B rows
// as 64 x 32 tiles (two 32-row sub-tiles) on a launch of `grid` blocks, else as 32 x 32 tiles:
// exactly when the pairs and the target network's 32 x 32 tiles fit one round and 32 x 32 tiles
// do not. Either way each activation has the same bits (diagnostics and tests).
bool dqn_fused_step_forward_pairs(std::size_t batch, std::size_t width, unsigned grid) noexcept;

// The grid of a launch for these widths ({obs, hidden..., A}: fused_step_supports) and batch B
// (setup: device queries only). Throws like fused_step_grid.
unsigned dqn_fused_step_grid(std::span<const std::size_t> widths, std::size_t batch,
                             const Activation& hidden_activation);

// One gradient step on a batch of B transitions. Per row b, as launch_dqn_loss_head
// (kernels/rl/dqn/dqn_loss_head.h) with q = Q_online(states), q_next_online = Q_online(next
// states), q_next_target = Q_target(next states): a* = greedy_action(q_next_online[b]), target =
// reward_scale r_b + (done_b ? 0 : discount q_next_target[b, a*]), td_b = target - q[b, a_b],
// dL/dq[b, a_b] = (w_b / B) huber'(q[b, a_b] - target) and 0 at the other actions; then the
// online backward of dL/dq over the states (online.weight_grads/bias_grads overwritten), the
// norm, clip and AdamW of launch_mlp_train_step_fused over the online slab, and, when
// (step + 1) % period == 0, every target param t of the slab becomes updated_target(t, p, tau)
// with p the online param after AdamW (kernels/rl/dqn/target_update.h's update). online_scratch:
// pre_activations and activations [2B, hidden], d_pre_activations [B, widths[l + 1]] (the last is
// dL/dq), loss partials [dqn_fused_step_loss_partials(B)], norm partials [grid]. Results equal the
// separate kernels' to rounding (every sum in a fixed order: reproducible for a given grid).
// Graph-capturable; throws resident::Error naming the value and the limit on invalid arguments.
void launch_dqn_train_step_fused(const DqnFusedOutputs& out, const FusedStepMlp& online,
                                 const FusedStepScratch& online_scratch,
                                 const DqnFusedTarget& target, const FusedStepOptimizer& optimizer,
                                 const DqnFusedBatch& batch, std::size_t batch_size,
                                 const DqnFusedConstants& constants, unsigned grid,
                                 cudaStream_t stream);

}  // namespace resident::kernels::dqn
