// The tree part of a split insert of 1 <= n <= kFewLeaves rows (launch_insert_leaves; skipped =
// 0, n <= capacity): the leaves of slots cursor .. cursor + n - 1 (wrapping at capacity) get the
// live maximum priority (read before anything is written), their generations grow by one, every
// kept node above them (replay_tree.cuh) is recomputed, and cursor and size advance. Writes what
// write_inserted_leaves writes, bit for bit; no row is touched.
//
// One block, 4 warps per kept level above the leaves (ceil(log2 P / 5) levels, at most 6): a
// range of at most 32 contiguous leaves has at most two ancestors per kept level, and a wrap makes
// two ranges, so each touched kept node gets a warp. Lane l of a node's warp holds its l-th
// descendant one kept level down. The tree is stable while this runs (the caller orders it after
// any update), so every descendant that is not itself rewritten (an untouched leaf or kept node)
// is loaded at the start, all levels in one wave; a rewritten one is the new priority (a touched
// leaf) or the value the level below computed, passed through shared memory after a block
// barrier per level. The warp then combines its lanes in pull_kept_node_by_warp's order
// (combine_kept_lanes<32>) and lane 0 writes the node. Two dependent memory round trips (the
// cursor and the root, then every load) instead of one per kept level. Deterministic.
#include <string>

#include "kernels/core/programmatic_launch.cuh"
#include "kernels/replay/inserted_leaves.cuh"
#include "kernels/replay/replay_kernels.h"
#include "kernels/replay/replay_tree.cuh"
#include "kernels/core/error.h"

namespace resident::kernels {

namespace {

constexpr int kWarpsPerLevel = 4;  // touched nodes per kept level: 2 per range, 2 ranges
constexpr int kMaxKeptLevels = 6;  // ceil(30 / 5): P <= 2^30
constexpr int kFewLeavesBlock = kWarpsPerLevel * 32 * kMaxKeptLevels;
static_assert(kFewLeaves <= (1u << kKeptLevelStride),
              "a range of kFewLeaves leaves must have at most two ancestors per kept level");

// The touched nodes at one height: [lo1, hi1] (the range before the wrap) and [lo2, hi2] (after
// it; empty when lo2 > hi2), each at most two nodes at a kept height.
struct TouchedNodes {
  std::uint32_t lo1, hi1, lo2, hi2;

  __device__ TouchedNodes(std::uint32_t leaves, std::uint32_t cursor, std::uint32_t first_hi,
                          std::uint32_t second_hi, int height)
      : lo1((leaves + cursor) >> height),
        hi1((leaves + first_hi - 1) >> height),
        lo2(leaves >> height),
        hi2(second_hi > 0 ? (leaves + second_hi - 1) >> height : (leaves >> height) - 1) {}

  __device__ bool contains(std::uint32_t node) const {
    return (node >= lo1 && node <= hi1) || (node >= lo2 && node <= hi2);
  }

  // The k-th touched node (k < kWarpsPerLevel): the first range's, then the second range's that
  // the first does not hold. False when there is none.
  __device__ bool nth(int k, std::uint32_t& node) const {
    const std::uint32_t count1 = hi1 - lo1 + 1, count2 = hi2 + 1 - lo2;
    const std::uint32_t item = static_cast<std::uint32_t>(k);
    if (item < count1) {
      node = lo1 + item;
      return true;
    }
    if (item >= count1 + count2) return false;
    node = lo2 + (item - count1);
    return node < lo1 || node > hi1;
  }
};

__device__ inline void load_node(const ReplayTreeView& tree, std::uint32_t node, double& s,
                                 double& lo, double& hi) {
  s = tree.sum[node];
  lo = tree.min_positive[node];
  hi = tree.max[node];
}

// blockDim.x = 32 (P = 1) or 128 x the number of kept levels above the leaves.
__global__ void __launch_bounds__(kFewLeavesBlock)
    insert_few_leaves(ReplayTreeView tree, std::uint32_t* generations, ReplayCounters* counters,
                      std::uint32_t n) {
  allow_next_kernel_to_start();  // the side stream's next kernel (or the draw) may schedule
  __shared__ std::uint32_t node_of[kMaxKeptLevels][kWarpsPerLevel];  // 0: no node
  __shared__ double sum_of[kMaxKeptLevels][kWarpsPerLevel];
  __shared__ double low_of[kMaxKeptLevels][kWarpsPerLevel];
  __shared__ double high_of[kMaxKeptLevels][kWarpsPerLevel];
  const double inf = __longlong_as_double(0x7ff0000000000000ll);
  const std::uint32_t capacity = tree.capacity, leaves = tree.leaves;
  const std::uint32_t cursor = counters->cursor;
  const std::uint64_t end = std::uint64_t{cursor} + n;
  const double priority = new_leaf_priority(tree);  // every thread, before the first barrier
  const int depth = tree_depth(tree);
  if (depth == 0) {  // P = 1 (n = 1): the one leaf is the root
    __syncthreads();
    if (threadIdx.x == 0) {
      set_leaf(tree, 0, priority);
      generations[0] += 1;
      advance_counters(counters, end, n, capacity);
    }
    return;
  }
  const std::uint32_t first_hi = static_cast<std::uint32_t>(end < capacity ? end : capacity);
  const std::uint32_t second_hi = static_cast<std::uint32_t>(end > capacity ? end - capacity : 0);
  const int levels = (depth + kKeptLevelStride - 1) / kKeptLevelStride;
  const int warp = static_cast<int>(threadIdx.x / 32);
  const std::uint32_t lane = threadIdx.x % 32;
  const int level = warp / kWarpsPerLevel, k = warp % kWarpsPerLevel;
  const int below = kKeptLevelStride * level;  // the kept height of this warp's lanes
  const int height = min(below + kKeptLevelStride, depth);
  const int r = height - below;
  std::uint32_t node = 0;
  const bool active =  // warp-uniform
      level < levels && TouchedNodes(leaves, cursor, first_hi, second_hi, height).nth(k, node);
  if (level < levels && lane == 0) node_of[level][k] = active ? node : 0;

  // First wave: every descendant nobody rewrites, loaded now; the touched leaves written.
  const std::uint32_t child = (node << r) + lane;
  const bool have = active && lane < (1u << r);
  double s = 0.0, lo = inf, hi = -inf;
  bool from_below = false;  // a kept node the level below recomputes: read after its barrier
  if (have && below == 0) {
    const std::uint32_t slot = child - leaves;
    if ((slot >= cursor && slot < first_hi) || slot < second_hi) {  // a new leaf
      set_leaf(tree, slot, priority);
      generations[slot] += 1;
      s = priority;  // set_leaf's three values (priority > 0)
      lo = priority;
      hi = priority;
    } else {
      load_node(tree, child, s, lo, hi);
    }
  } else if (have) {
    from_below = TouchedNodes(leaves, cursor, first_hi, second_hi, below).contains(child);
    if (!from_below) load_node(tree, child, s, lo, hi);
  }

  // Level by level: a block barrier makes the level below final (and every thread has read the
  // root before the top level rewrites it); block-uniform loop.
  for (int l = 0; l < levels; ++l) {
    __syncthreads();
    if (level != l || !active) continue;  // warp-uniform
    if (from_below) {
      for (int j = 0; j < kWarpsPerLevel; ++j)
        if (node_of[l - 1][j] == child) {
          s = sum_of[l - 1][j];
          lo = low_of[l - 1][j];
          hi = high_of[l - 1][j];
          break;
        }
    }
    combine_kept_lanes<32>(s, lo, hi);
    if (lane == 0) {
      tree.sum[node] = s;
      tree.min_positive[node] = lo;
      tree.max[node] = hi;
      sum_of[l][k] = s;
      low_of[l][k] = lo;
      high_of[l][k] = hi;
    }
  }
  __syncthreads();  // every thread has read the old cursor
  if (threadIdx.x == 0) advance_counters(counters, end, n, capacity);
}

}  // namespace

void launch_insert_few_leaves(ReplayTreeView tree, std::uint32_t* generations,
                              ReplayCounters* counters, std::uint32_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (n > kFewLeaves || n > tree.capacity || tree.leaves == 0 || tree.leaves > (1u << 30))
    throw Error("launch_insert_few_leaves", "invalid argument",
                "n = " + std::to_string(n) + " with capacity " + std::to_string(tree.capacity) +
                    " and P = " + std::to_string(tree.leaves) +
                    ", allowed 1 <= n <= min(32, capacity), 1 <= P <= 2^30",
                __FILE__, __LINE__);
  int depth = 0;
  while ((1u << depth) < tree.leaves) ++depth;
  const int levels = (depth + kKeptLevelStride - 1) / kKeptLevelStride;
  const unsigned threads = levels == 0 ? 32u : static_cast<unsigned>(levels * kWarpsPerLevel * 32);
  insert_few_leaves<<<1, threads, 0, stream>>>(tree, generations, counters, n);
  RESIDENT_CHECK_LAUNCH("insert_few_leaves");
}

}  // namespace resident::kernels
