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

// Combines each lane's (sum, min_positive, max) partial with those of the other lanes of its
// aligned group of kLanes (a power of two <= 32) by xor shuffles, in CpuSumTree::pull's pairwise
// order (a lane's partial covers the descendants before its xor partner's); every lane of a
// group ends with the same bits. Every lane of the warp calls it (full mask).
template <int kLanes>
__device__ inline void combine_kept_lanes(double& s, double& lo, double& hi) {
  constexpr unsigned kFullMask = 0xffffffffu;
#pragma unroll
  for (int step = 1; step < kLanes; step *= 2) {
    s = s + __shfl_xor_sync(kFullMask, s, step);
    lo = fmin(lo, __shfl_xor_sync(kFullMask, lo, step));
    hi = fmax(hi, __shfl_xor_sync(kFullMask, hi, step));
  }
}

// Recomputes the kept node `node` from its 2^r descendants r levels down (1 <= r <= 5), which
// must be final. Every lane of the warp calls it (it shuffles with the full mask); each aligned
// quad handles its own node, and a quad whose lanes pass active = false loads and writes
// nothing. Lane q of the quad combines descendants [8q, 8q + 8) pairwise (those past 2^r are the
// identities 0, +inf, -inf: exact), then two xor shuffles combine the quad's four partials in
// the same pairing; lane 0 of the quad writes the three trees. Deterministic, bit-exact.
__device__ inline void pull_kept_node_by_quad(const ReplayTreeView& tree, std::uint32_t node,
                                              int r, bool active) {
  const double inf = __longlong_as_double(0x7ff0000000000000ll);
  const std::uint32_t q = threadIdx.x % kLanesPerKeptNode;
  const std::uint32_t width = 1u << r;
  const std::uint32_t offset = q * kDescendantsPerLane;
  const std::uint32_t first = (node << r) + offset;  // even: 16-byte aligned pairs
  double sum[kDescendantsPerLane], low[kDescendantsPerLane], high[kDescendantsPerLane];
#pragma unroll
  for (int c = 0; c < kDescendantsPerLane; c += 2) {
    const bool have = active && offset + c < width;  // width is even: a pair is whole or absent
    const double2 s = have ? *reinterpret_cast<const double2*>(tree.sum + first + c)
                           : double2{0.0, 0.0};
    const double2 lo = have ? *reinterpret_cast<const double2*>(tree.min_positive + first + c)
                            : double2{inf, inf};
    const double2 hi = have ? *reinterpret_cast<const double2*>(tree.max + first + c)
                            : double2{-inf, -inf};
    sum[c] = s.x, sum[c + 1] = s.y;
    low[c] = lo.x, low[c + 1] = lo.y;
    high[c] = hi.x, high[c + 1] = hi.y;
  }
#pragma unroll
  for (int span = 1; span < kDescendantsPerLane; span *= 2)
#pragma unroll
    for (int c = 0; c < kDescendantsPerLane; c += 2 * span) {
      sum[c] = sum[c] + sum[c + span];
      low[c] = fmin(low[c], low[c + span]);
      high[c] = fmax(high[c], high[c + span]);
    }
  double s = sum[0], lo = low[0], hi = high[0];
  combine_kept_lanes<kLanesPerKeptNode>(s, lo, hi);
  if (active && q == 0) {
    tree.sum[node] = s;
    tree.min_positive[node] = lo;
    tree.max[node] = hi;
  }
}

// Recomputes the kept node `node` from its 2^r descendants r levels down (1 <= r <= 5), which
// must be final, with one warp: all 32 lanes call it with the same node. Lane l loads descendant
// l (the identities 0, +inf, -inf past 2^r: exact), so the warp's loads are three coalesced
// requests in flight together; five xor shuffles combine the lanes in the pairwise order of
// pull_kept_node_by_quad (the same bits), and lane 0 writes the three trees.
__device__ inline void pull_kept_node_by_warp(const ReplayTreeView& tree, std::uint32_t node,
                                              int r) {
  const double inf = __longlong_as_double(0x7ff0000000000000ll);
  const std::uint32_t lane = threadIdx.x % 32;
  const bool have = lane < (1u << r);
  const std::uint32_t at = (node << r) + lane;
  double s = have ? tree.sum[at] : 0.0;
  double lo = have ? tree.min_positive[at] : inf;
  double hi = have ? tree.max[at] : -inf;
  combine_kept_lanes<32>(s, lo, hi);
  if (lane == 0) {
    tree.sum[node] = s;
    tree.min_positive[node] = lo;
    tree.max[node] = hi;
  }
}

}  // namespace resident::kernels
