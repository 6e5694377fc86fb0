// One row's states and next_states ([dim] floats each) copied by a group of `group_size` threads
// (this thread is `lane` of it: coalesced over the elements). Every load of a pass
// (kStateElementsPerThread elements of each per thread: rows of dim <= 4 group_size take one
// pass) is issued before the pass's first store. Without that the compiler may not move a load
// past a store that might alias it, and a load-store loop waits one memory round trip per
// element (the SASS alternated LDG and STG). `between()` runs once, by every thread of the
// group, after the first pass's loads are issued and before any store, so the caller's own
// loads and arithmetic overlap them. Overwrites the outputs.
#pragma once

#include <cstdint>

namespace resident::kernels {

constexpr int kStateElementsPerThread = 4;

template <typename Between>
__device__ inline void copy_state_rows(const float* states, const float* next_states,
                                       float* states_out, float* next_states_out,
                                       std::uint64_t dim, std::uint32_t lane,
                                       std::uint32_t group_size, Between&& between) {
  const std::uint64_t pass = std::uint64_t{group_size} * kStateElementsPerThread;
  for (std::uint64_t base = 0; base < dim; base += pass) {
    float state[kStateElementsPerThread] = {}, next_state[kStateElementsPerThread] = {};
#pragma unroll
    for (int j = 0; j < kStateElementsPerThread; ++j) {
      const std::uint64_t c = base + lane + std::uint64_t{group_size} * j;
      if (c < dim) {
        state[j] = states[c];
        next_state[j] = next_states[c];
      }
    }
    if (base == 0) between();
#pragma unroll
    for (int j = 0; j < kStateElementsPerThread; ++j) {
      const std::uint64_t c = base + lane + std::uint64_t{group_size} * j;
      if (c < dim) {
        states_out[c] = state[j];
        next_states_out[c] = next_state[j];
      }
    }
  }
}

}  // namespace resident::kernels
