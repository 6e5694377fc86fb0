// The Huber loss of one residual d and its derivative in d (device code: include from .cu files
// only), in fp32 as written: shared by the kit's Huber loss (kernels/nn/losses.cu), the DQN loss
// head (kernels/rl/dqn/dqn_loss_head.cu) and the fused DQN step, so that all three round alike.
//   huber(d)  = d^2 / 2                  for |d| <= delta
//             = delta (|d| - delta / 2)  otherwise
//   huber'(d) = clamp(d, -delta, delta)
#pragma once

namespace resident::kernels::huber {

__device__ inline float value(float d, float delta) {
  const float a = fabsf(d);
  return a <= delta ? 0.5f * d * d : delta * (a - 0.5f * delta);
}

__device__ inline float derivative(float d, float delta) {
  return d > delta ? delta : (d < -delta ? -delta : d);
}

}  // namespace resident::kernels::huber
