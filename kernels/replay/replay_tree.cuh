// Device helpers over ReplayTreeView: the kept levels, their recomputation and the leaf write.
//
// The GPU trees keep every fifth level up to date: heights 0 (the leaves), 5, 10, ..., and the
// root (height depth = log2 P). A kept node is the pairwise combination (CpuSumTree::pull's
// additions, fmin and fmax, in its order) of its 2^r descendants at the kept height below, with
// r = 5, or depth % 5 for the topmost group (the root's); so every kept node holds the same bits
// as CpuSumTree's node at that index. The heights in between are not maintained (their storage
// stays as initialised): the proportional draw rebuilds them in registers from one kept group,
// and an update or insert recomputes one level per five.
#pragma once

#include <cuda_pipeline.h>

#include <cstdint>

#include "kernels/replay/replay_state.h"

namespace resident::kernels {

// Levels between kept heights (the last step below the root may be shorter).
constexpr int kKeptLevelStride = 5;
// Lanes that recompute one kept node together (an aligned quad), 8 descendants each.
constexpr int kLanesPerKeptNode = 4;
constexpr int kDescendantsPerLane = 32 / kLanesPerKeptNode;

// log2(P): the number of levels above the leaves.
__device__ inline int tree_depth(const ReplayTreeView& tree) { return __ffs(tree.leaves) - 1; }

// Levels from the kept height `below` to the next kept height above it.
__device__ inline int kept_step(int below, int depth) {
  return min(kKeptLevelStride, depth - below);
}

// Leaf `slot` := priority in all three trees (+inf in the min tree for a zero priority).
__device__ inline void set_leaf(const ReplayTreeView& tree, std::uint32_t slot, double priority) {
  const std::uint32_t node = tree.leaves + slot;
  tree.sum[node] = priority;
  tree.min_positive[node] = priority > 0.0 ? priority : __longlong_as_double(0x7ff0000000000000ll);
  tree.max[node] = priority;
}

// Pairs of one tree's descendants a lane loads (two doubles each, 16-byte aligned), and of the
// three trees: the 16-byte copies pull_kept_node_by_quad_staged stages per thread.
constexpr int kPairsPerLane = kDescendantsPerLane / 2;
constexpr int kStagedPairsPerThread = 3 * kPairsPerLane;

namespace kept_node_detail {

// Lane q of the quad holds descendants [8q, 8q + 8) of each tree (identities past 2^r): combines
// them pairwise, then two xor shuffles combine the quad's four partials in the same pairing;
// lane 0 of the quad writes the three trees when active.
__device__ inline void combine_and_write(const ReplayTreeView& tree, std::uint32_t node,
                                         bool active, double (&sum)[kDescendantsPerLane],
                                         double (&low)[kDescendantsPerLane],
                                         double (&high)[kDescendantsPerLane]) {
  constexpr unsigned kFullMask = 0xffffffffu;
#pragma unroll
  for (int span = 1; span < kDescendantsPerLane; span *= 2)
#pragma unroll
    for (int c = 0; c < kDescendantsPerLane; c += 2 * span) {
      sum[c] = sum[c] + sum[c + span];
      low[c] = fmin(low[c], low[c + span]);
      high[c] = fmax(high[c], high[c + span]);
    }
  double s = sum[0], lo = low[0], hi = high[0];
#pragma unroll
  for (int step = 1; step < kLanesPerKeptNode; step *= 2) {
    s = s + __shfl_xor_sync(kFullMask, s, step);
    lo = fmin(lo, __shfl_xor_sync(kFullMask, lo, step));
    hi = fmax(hi, __shfl_xor_sync(kFullMask, hi, step));
  }
  if (active && threadIdx.x % kLanesPerKeptNode == 0) {
    tree.sum[node] = s;
    tree.min_positive[node] = lo;
    tree.max[node] = hi;
  }
}

// Whether pair c (0 <= c < 8, even) of this lane's descendants exists: width 2^r is even, so a
// pair is whole or absent.
__device__ inline bool have_pair(bool active, int r, int c) {
  return active && (threadIdx.x % kLanesPerKeptNode) * kDescendantsPerLane + c < (1u << r);
}

__device__ inline std::uint32_t first_descendant(std::uint32_t node, int r) {
  return (node << r) + (threadIdx.x % kLanesPerKeptNode) * kDescendantsPerLane;  // even
}

__device__ inline void unpack(double2 pair, double* out, int c) {
  out[c] = pair.x;
  out[c + 1] = pair.y;
}

}  // namespace kept_node_detail

// Recomputes the kept node `node` from its 2^r descendants r levels down (1 <= r <= 5), which
// must be final. Every lane of the warp calls it (it shuffles with the full mask); each aligned
// quad handles its own node, and a quad whose lanes pass active = false loads and writes
// nothing. Lane q of the quad combines descendants [8q, 8q + 8) pairwise (those past 2^r are the
// identities 0, +inf, -inf: exact), then two xor shuffles combine the quad's four partials in
// the same pairing; lane 0 of the quad writes the three trees. Deterministic, bit-exact.
// The 12 16-byte loads go to registers: under a 64-register cap (1024-thread blocks) the
// compiler issues them in several dependent waves; see the staged variant below.
__device__ inline void pull_kept_node_by_quad(const ReplayTreeView& tree, std::uint32_t node,
                                              int r, bool active) {
  using namespace kept_node_detail;
  const double inf = __longlong_as_double(0x7ff0000000000000ll);
  const std::uint32_t first = first_descendant(node, r);
  double sum[kDescendantsPerLane], low[kDescendantsPerLane], high[kDescendantsPerLane];
#pragma unroll
  for (int c = 0; c < kDescendantsPerLane; c += 2) {
    const bool have = have_pair(active, r, c);
    unpack(have ? *reinterpret_cast<const double2*>(tree.sum + first + c) : double2{0.0, 0.0},
           sum, c);
    unpack(have ? *reinterpret_cast<const double2*>(tree.min_positive + first + c)
                : double2{inf, inf},
           low, c);
    unpack(have ? *reinterpret_cast<const double2*>(tree.max + first + c) : double2{-inf, -inf},
           high, c);
  }
  combine_and_write(tree, node, active, sum, low, high);
}

// pull_kept_node_by_quad with every load in flight at once: the lane's 12 16-byte copies go to
// shared memory by cp.async (__pipeline_memcpy_async: no destination registers), one wait,
// then the same combination in the same order (same bits). `stage` is a shared
// [kStagedPairsPerThread][stride] double2 array, threadIdx.x < stride (pair-major: a warp's
// reads of one pair are consecutive, conflict-free); each thread reads back only what it copied
// itself, so the wait needs no barrier. Every lane of the warp calls it.
__device__ inline void pull_kept_node_by_quad_staged(const ReplayTreeView& tree,
                                                     std::uint32_t node, int r, bool active,
                                                     double2* stage, std::uint32_t stride) {
  using namespace kept_node_detail;
  const double inf = __longlong_as_double(0x7ff0000000000000ll);
  const std::uint32_t first = first_descendant(node, r);
  double2* mine = stage + threadIdx.x;
  const double* trees[3] = {tree.sum, tree.min_positive, tree.max};
#pragma unroll
  for (int c = 0; c < kDescendantsPerLane; c += 2)
    if (have_pair(active, r, c))
#pragma unroll
      for (int t = 0; t < 3; ++t)
        __pipeline_memcpy_async(mine + (t * kPairsPerLane + c / 2) * stride,
                                trees[t] + first + c, sizeof(double2));
  __pipeline_commit();
  __pipeline_wait_prior(0);
  asm volatile("" ::: "memory");  // no shared read moves above the wait (its asm has no clobber)
  double sum[kDescendantsPerLane], low[kDescendantsPerLane], high[kDescendantsPerLane];
#pragma unroll
  for (int c = 0; c < kDescendantsPerLane; c += 2) {
    const bool have = have_pair(active, r, c);
    unpack(have ? mine[(0 * kPairsPerLane + c / 2) * stride] : double2{0.0, 0.0}, sum, c);
    unpack(have ? mine[(1 * kPairsPerLane + c / 2) * stride] : double2{inf, inf}, low, c);
    unpack(have ? mine[(2 * kPairsPerLane + c / 2) * stride] : double2{-inf, -inf}, high, c);
  }
  combine_and_write(tree, node, active, sum, low, high);
}

}  // namespace resident::kernels
