// Epsilon-greedy action selection on the device (kernels/rl/dqn/epsilon_greedy.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::dqn {

// Linear schedule over env steps t = vector_step * env_count:
//   epsilon(t) = start + (end - start) * t / decay_env_steps for t < decay_env_steps, else end
// (decay_env_steps == 0: always end). Evaluated in double.
struct EpsilonSchedule {
  double start = 1.0;
  double end = 0.05;
  std::uint64_t decay_env_steps = 0;
};

// The epsilon of env step t (host and device use the same formula).
__host__ __device__ inline double epsilon_at(const EpsilonSchedule& s, std::uint64_t t) {
  if (s.decay_env_steps == 0 || t >= s.decay_env_steps) return s.end;
  return s.start + (s.end - s.start) * (static_cast<double>(t) / static_cast<double>(s.decay_env_steps));
}

// actions [N] (overwritten) from q_values [N, A] row-major. Env n draws two 32-bit values d0, d1
// from cuRAND Philox (seed = philox_seed, subsequence = n, offset = 4 * *vector_step), turns
// each into u = (d >> 8) * 2^-24 (exact in float and double) and acts
//   random:  min(floor(u1 * A), A - 1)   when u0 < epsilon(*vector_step * N)
//   greedy:  the first index of the largest q (NaN never wins; all NaN: 0)  otherwise.
// Reads *vector_step on the device (it is advanced by launch_episode_tracker, later in the
// same collection step), so graph replays explore with fresh draws and a moving epsilon.
// Deterministic, no atomics; one thread per env.
void launch_epsilon_greedy(std::int32_t* actions, const float* q_values, std::size_t env_count,
                           std::size_t action_count, const EpsilonSchedule& schedule,
                           const std::uint64_t* vector_step, std::uint64_t philox_seed,
                           cudaStream_t stream);

}  // namespace resident::kernels::dqn
