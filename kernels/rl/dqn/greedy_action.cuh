// The greedy action of one row of Q-values: the first index of the largest non-NaN value, 0 when
// every value is NaN. Shared by epsilon_greedy (acting) and dqn_loss_head (double-DQN targets).
#pragma once

#include <cstddef>

namespace resident::kernels::dqn {

__device__ inline std::size_t greedy_action(const float* q, std::size_t action_count) {
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
  return best_a;
}

}  // namespace resident::kernels::dqn
