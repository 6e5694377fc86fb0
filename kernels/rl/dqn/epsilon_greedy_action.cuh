// Env n's epsilon-greedy action (launch_epsilon_greedy's rule, kernels/rl/dqn/epsilon_greedy.h):
// shared by epsilon_greedy (one thread per env) and dqn_act_fused (lane 0 of a row's warp), so
// both act the same on the same Q-values. Device code: include from .cu files only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/core/philox.cuh"
#include "kernels/rl/dqn/greedy_action.cuh"

namespace resident::kernels::dqn {

// Two 32-bit Philox draws d0, d1 (seed, subsequence n, offset 4 * step) as u = (d >> 8) * 2^-24;
// random min(floor(u1 * A), A - 1) when u0 < epsilon, else greedy_action(q, A).
__device__ inline std::int32_t epsilon_greedy_action(const float* q, std::size_t action_count,
                                                     double epsilon, std::uint64_t philox_seed,
                                                     std::uint64_t step, std::size_t n) {
  curandStatePhilox4_32_10_t rng = philox_state(PhiloxKey{philox_seed, 4 * step}, n);
  const unsigned d0 = curand(&rng);
  const unsigned d1 = curand(&rng);
  const double u0 = static_cast<double>(d0 >> 8) * 0x1.0p-24;
  const double u1 = static_cast<double>(d1 >> 8) * 0x1.0p-24;
  if (u0 < epsilon) {
    const std::size_t a = static_cast<std::size_t>(u1 * static_cast<double>(action_count));
    return static_cast<std::int32_t>(a < action_count ? a : action_count - 1);
  }
  return static_cast<std::int32_t>(greedy_action(q, action_count));
}

}  // namespace resident::kernels::dqn
