// The replay tests' buffer config (CPU and GPU tests alike; header-only, no CUDA).
#pragma once

#include <cstddef>
#include <cstdint>

#include "lib/replay/replay_config.h"

namespace resident::test {

// alpha 0.6, beta 0.4 -> 1 over `beta_annealing_steps` sample calls, epsilon 1e-3, and the given
// capacity, state_dim, mode and sampling.
inline ReplayConfig replay_test_config(std::size_t capacity, std::size_t state_dim,
                                       ReplayPriorityMode mode, ReplaySampling sampling,
                                       std::uint64_t beta_annealing_steps) {
  ReplayConfig c;
  c.capacity = capacity;
  c.state_dim = state_dim;
  c.alpha = 0.6;
  c.beta_start = 0.4;
  c.beta_max = 1.0;
  c.beta_annealing_steps = beta_annealing_steps;
  c.epsilon = 1e-3;
  c.mode = mode;
  c.sampling = sampling;
  return c;
}

}  // namespace resident::test
