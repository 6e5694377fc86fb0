// One element of a target-network update (device code: include from .cu files only): shared by
// the slab-wide target update (kernels/rl/dqn/target_update.cu) and the fused DQN step, so both
// round alike. tau == 1 copies the online value (exact); otherwise the Polyak step
// t + tau (o - t) in float as written (no FMA contraction).
#pragma once

namespace resident::kernels::dqn {

__device__ inline float updated_target(float target, float online, float tau) {
  if (tau == 1.0f) return online;
  return __fadd_rn(target, __fmul_rn(tau, __fsub_rn(online, target)));
}

}  // namespace resident::kernels::dqn
