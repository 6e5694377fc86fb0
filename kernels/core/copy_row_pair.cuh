// Two float rows of `count` elements (a -> a_out, b -> b_out: a replay row's states and
// next_states, an env's two observations) copied by a group of `group_size` threads (this thread
// is `lane` of it: coalesced over the elements). Every load of a pass (kRowPairElementsPerThread
// elements of each row per thread: rows of count <= 4 group_size take one pass) is issued before
// the pass's first store. Without that the compiler may not move a load past a store that might
// alias it, and a load-store loop waits one memory round trip per element (the SASS alternated
// LDG and STG). `between()` runs once, by every thread of the group, after the first pass's
// loads are issued and before any store (at once when count is 0), so the caller's own loads
// and arithmetic overlap them. Overwrites the outputs.
#pragma once

#include <cstdint>

namespace resident::kernels {

constexpr int kRowPairElementsPerThread = 4;

template <typename Between>
__device__ inline void copy_row_pair(const float* a, const float* b, float* a_out, float* b_out,
                                     std::uint64_t count, std::uint32_t lane,
                                     std::uint32_t group_size, Between&& between) {
  if (count == 0) {
    between();
    return;
  }
  const std::uint64_t pass = std::uint64_t{group_size} * kRowPairElementsPerThread;
  for (std::uint64_t base = 0; base < count; base += pass) {
    float a_value[kRowPairElementsPerThread] = {}, b_value[kRowPairElementsPerThread] = {};
#pragma unroll
    for (int j = 0; j < kRowPairElementsPerThread; ++j) {
      const std::uint64_t c = base + lane + std::uint64_t{group_size} * j;
      if (c < count) {
        a_value[j] = a[c];
        b_value[j] = b[c];
      }
    }
    if (base == 0) between();
#pragma unroll
    for (int j = 0; j < kRowPairElementsPerThread; ++j) {
      const std::uint64_t c = base + lane + std::uint64_t{group_size} * j;
      if (c < count) {
        a_out[c] = a_value[j];
        b_out[c] = b_value[j];
      }
    }
  }
}

}  // namespace resident::kernels
