// The DQN loss head: one block, one thread per row (strided). Contract in dqn_loss_head.h.
#include "kernels/rl/dqn/dqn_loss_head.h"

#include <cub/block/block_reduce.cuh>

#include <cmath>
#include <string>

#include "kernels/nn/huber.cuh"
#include "kernels/rl/dqn/greedy_action.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::dqn {

namespace {

constexpr int kThreads = 256;

// The double-DQN target of row b (float, rounding as written: __fmul_rn, __fadd_rn; the online
// network picks the action, the target network values it).
__device__ inline float double_dqn_target(const DqnLossHeadInputs& in, std::size_t b,
                                          std::size_t action_count, float discount,
                                          float reward_scale) {
  const std::size_t best_a = greedy_action(in.q_next_online + b * action_count, action_count);
  const float bootstrap =
      in.dones[b] != 0 ? 0.0f : __fmul_rn(discount, in.q_next_target[b * action_count + best_a]);
  return __fadd_rn(__fmul_rn(reward_scale, in.rewards[b]), bootstrap);
}

__global__ void __launch_bounds__(kThreads)
    dqn_loss_head(DqnLossHeadOutputs out, DqnLossHeadInputs in, std::size_t batch,
                  std::size_t action_count, float discount, float reward_scale, float delta,
                  float grad_scale) {
  using BlockSum = cub::BlockReduce<float, kThreads>;
  __shared__ typename BlockSum::TempStorage temp;
  float loss = 0.0f;
  for (std::size_t b = threadIdx.x; b < batch; b += kThreads) {
    const float target = double_dqn_target(in, b, action_count, discount, reward_scale);
    const std::int32_t action = in.actions[b];
    const bool valid = action >= 0 && static_cast<std::size_t>(action) < action_count;
    const float q = valid ? in.q[b * action_count + static_cast<std::size_t>(action)]
                          : __int_as_float(0x7fc00000);
    out.td_errors[b] = __fsub_rn(target, q);
    const float w = in.is_weights != nullptr ? in.is_weights[b] : 1.0f;
    const float d = q - target;
    loss += w * huber::value(d, delta);
    const float weight = in.is_weights != nullptr ? grad_scale * w : grad_scale;
    const float grad = weight * huber::derivative(d, delta);
    float* row = out.d_q + b * action_count;
    for (std::size_t a = 0; a < action_count; ++a)
      row[a] = static_cast<std::int32_t>(a) == action ? grad : 0.0f;
  }
  const float total = BlockSum(temp).Sum(loss);
  if (threadIdx.x == 0)
    out.loss[0] = static_cast<float>(static_cast<double>(total) / static_cast<double>(batch));
}

}  // namespace

void launch_dqn_loss_head(const DqnLossHeadOutputs& out, const DqnLossHeadInputs& in,
                          std::size_t batch, std::size_t action_count, float discount,
                          float reward_scale, float delta, cudaStream_t stream) {
  if (batch == 0 || action_count == 0)
    throw Error("launch_dqn_loss_head", "invalid size",
                "batch = " + std::to_string(batch) + ", action_count = " +
                    std::to_string(action_count) + ", both must be >= 1",
                __FILE__, __LINE__);
  if (!(delta > 0.0f) || !std::isfinite(delta))
    throw Error("launch_dqn_loss_head", "invalid argument",
                "delta = " + std::to_string(delta) + ", allowed finite and > 0", __FILE__, __LINE__);
  const NvtxRange range("dqn/loss_head");
  const auto grad_scale = static_cast<float>(1.0 / static_cast<double>(batch));
  dqn_loss_head<<<1, kThreads, 0, stream>>>(out, in, batch, action_count, discount, reward_scale,
                                            delta, grad_scale);
  RESIDENT_CHECK_LAUNCH("dqn_loss_head");
}

}  // namespace resident::kernels::dqn
