// Device helpers over ReplayTreeView: CpuSumTree's node recomputation and leaf write.
#pragma once

#include <cstdint>

#include "kernels/replay/replay_state.h"

namespace resident::kernels {

// Recomputes internal node `node` from its children (CpuSumTree::pull).
__device__ inline void pull_node(const ReplayTreeView& tree, std::uint32_t node) {
  const std::uint32_t left = 2 * node;
  tree.sum[node] = tree.sum[left] + tree.sum[left + 1];
  tree.min_positive[node] = fmin(tree.min_positive[left], tree.min_positive[left + 1]);
  tree.max[node] = fmax(tree.max[left], tree.max[left + 1]);
}

// Leaf `slot` := priority in all three trees (+inf in the min tree for a zero priority).
__device__ inline void set_leaf(const ReplayTreeView& tree, std::uint32_t slot, double priority) {
  const std::uint32_t node = tree.leaves + slot;
  tree.sum[node] = priority;
  tree.min_positive[node] = priority > 0.0 ? priority : __longlong_as_double(0x7ff0000000000000ll);
  tree.max[node] = priority;
}

// log2(P): the number of levels above the leaves.
__device__ inline int tree_depth(const ReplayTreeView& tree) { return __ffs(tree.leaves) - 1; }

}  // namespace resident::kernels
