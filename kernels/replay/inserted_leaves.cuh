// Device helpers shared by the two tree kernels of an insert (insert_transitions.cu's
// write_inserted_leaves, insert_few_leaves.cu): the priority a new leaf gets and the counters'
// advance after the leaves are written.
#pragma once

#include <cstdint>

#include "kernels/replay/replay_state.h"

namespace resident::kernels {

// The live maximum priority a new leaf gets (1.0 when no leaf is positive). Read before any leaf
// or kept node of the insert is written (the root is the last node the insert rewrites).
__device__ inline double new_leaf_priority(const ReplayTreeView& tree) {
  const double live_max = tree.max[1];
  return live_max > 0.0 ? live_max : 1.0;
}

// cursor := end % capacity (end = the old cursor + skipped + n), size += n (at most capacity).
// One thread, after every thread of the insert has read the old cursor.
__device__ inline void advance_counters(ReplayCounters* counters, std::uint64_t end,
                                        std::uint32_t n, std::uint32_t capacity) {
  counters->cursor = static_cast<std::uint32_t>(end % capacity);
  const std::uint64_t size = std::uint64_t{counters->size} + n;
  counters->size = static_cast<std::uint32_t>(size < capacity ? size : capacity);
}

}  // namespace resident::kernels
