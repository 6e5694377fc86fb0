// Insert of a batch at the device cursor (ring buffer, wrap-around), as CpuReplayBuffer does it
// row by row: row r of the batch goes to slot (cursor + r) % capacity. Of a batch longer than
// the capacity only the last n = capacity rows survive; the caller passes those rows and
// `skipped`, the number of earlier rows, so that kept row j lands on slot
// (cursor + skipped + j) % capacity and that slot's generation grows by the number of rows of
// the whole batch that wrote it, (skipped + j) / capacity + 1.
//
// copy_rows: one thread per (row, state element). Overwrites the slots' rows.
// write_inserted_leaves(_warp): one block (one warp when n <= 32). Reads the live maximum
//   priority (the max tree's root; 1.0 when no leaf is positive) before touching any leaf, sets
//   the n leaves to it, bumps their generations, then recomputes the ancestors level by level
//   (each level's touched nodes are one or two contiguous ranges; the warp keeps one range in
//   registers), and finally advances cursor by skipped + n and size.
// Deterministic: every node is recomputed from its children, never accumulated.
#include "kernels/replay/replay_kernels.h"
#include "kernels/replay/replay_tree.cuh"
#include "kernels/core/launch_config.h"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr int kTreeBlock = 1024;
constexpr unsigned kFullMask = 0xffffffffu;

__global__ void copy_rows(ReplayStorageView storage, const ReplayCounters* counters,
                          std::uint32_t capacity, const float* states, const std::int32_t* actions,
                          const float* rewards, const float* next_states,
                          const std::uint8_t* dones, std::uint32_t n, std::uint32_t skipped) {
  const std::uint32_t cursor = static_cast<std::uint32_t>(
      (std::uint64_t{counters->cursor} + skipped) % capacity);
  const std::uint64_t dim = storage.state_dim;
  const std::uint64_t total = std::uint64_t{n} * dim;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t row = i / dim;
    const std::uint64_t col = i - row * dim;
    const std::uint64_t slot = (cursor + row) % capacity;
    storage.states[slot * dim + col] = states[i];
    storage.next_states[slot * dim + col] = next_states[i];
    if (col == 0) {
      storage.actions[slot] = actions[row];
      storage.rewards[slot] = rewards[row];
      storage.dones[slot] = dones[row];
    }
  }
}

// The live maximum priority a new leaf gets (1.0 when no leaf is positive).
__device__ inline double new_leaf_priority(const ReplayTreeView& tree) {
  const double live_max = tree.max[1];
  return live_max > 0.0 ? live_max : 1.0;
}

__device__ inline void advance_counters(ReplayCounters* counters, std::uint64_t end,
                                        std::uint32_t n, std::uint32_t capacity) {
  counters->cursor = static_cast<std::uint32_t>(end % capacity);  // cursor + skipped + n
  const std::uint64_t size = std::uint64_t{counters->size} + n;
  counters->size = static_cast<std::uint32_t>(size < capacity ? size : capacity);
}

// The whole block: leaves, generations, then every level's touched nodes (one or two
// contiguous ranges) recomputed from their children in global memory, a barrier per level.
__device__ void write_leaves_by_levels(const ReplayTreeView& tree, std::uint32_t* generations,
                                       ReplayCounters* counters, std::uint32_t n,
                                       std::uint32_t skipped, std::uint32_t cursor) {
  __shared__ double new_priority;
  const std::uint32_t capacity = tree.capacity;
  if (threadIdx.x == 0) new_priority = new_leaf_priority(tree);
  __syncthreads();
  for (std::uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
    const std::uint32_t slot = static_cast<std::uint32_t>((std::uint64_t{cursor} + i) % capacity);
    set_leaf(tree, slot, new_priority);
    generations[slot] += (skipped + i) / capacity + 1;
  }
  // Touched leaves: [cursor, cursor + n) before the wrap, [0, end - capacity) after it.
  const std::uint64_t end = std::uint64_t{cursor} + n;
  const std::uint32_t first_hi = static_cast<std::uint32_t>(end < capacity ? end : capacity);
  const std::uint32_t second_hi = static_cast<std::uint32_t>(end > capacity ? end - capacity : 0);
  const int depth = tree_depth(tree);
  for (int level = 1; level <= depth; ++level) {
    __syncthreads();
    const std::uint32_t lo1 = (tree.leaves + cursor) >> level;
    const std::uint32_t hi1 = (tree.leaves + first_hi - 1) >> level;
    for (std::uint32_t node = lo1 + threadIdx.x; node <= hi1; node += blockDim.x)
      pull_node(tree, node);
    if (second_hi > 0) {
      const std::uint32_t lo2 = tree.leaves >> level;
      const std::uint32_t hi2 = (tree.leaves + second_hi - 1) >> level;
      for (std::uint32_t node = lo2 + threadIdx.x; node <= hi2; node += blockDim.x)
        if (node < lo1 || node > hi1) pull_node(tree, node);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) advance_counters(counters, end, n, capacity);
}

__global__ void __launch_bounds__(kTreeBlock)
    write_inserted_leaves(ReplayTreeView tree, std::uint32_t* generations,
                          ReplayCounters* counters, std::uint32_t n, std::uint32_t skipped) {
  const std::uint32_t cursor = static_cast<std::uint32_t>(
      (std::uint64_t{counters->cursor} + skipped) % tree.capacity);
  write_leaves_by_levels(tree, generations, counters, n, skipped, cursor);
}

struct NodeValue {
  double sum, min_positive, max;
};

__device__ inline NodeValue shfl_node(const NodeValue& v, int lane) {
  return {__shfl_sync(kFullMask, v.sum, lane), __shfl_sync(kFullMask, v.min_positive, lane),
          __shfl_sync(kFullMask, v.max, lane)};
}

// One warp, n <= 32. Without a wrap the touched nodes of every level are one contiguous range
// [lo, hi] of at most 32 nodes: lane i holds node lo + i in registers, takes its touched
// children from the lanes of the level below (shuffles), and its untouched ones (only ever the
// range's outer neighbours, nothing writes them here) from registers loaded before the walk:
// lane l - 1 holds level l's two outer siblings. No barrier and no re-read of a written node.
// With a wrap (two ranges), the block path. Same combine order as pull_node: the same bits.
__global__ void __launch_bounds__(32)
    write_inserted_leaves_warp(ReplayTreeView tree, std::uint32_t* generations,
                               ReplayCounters* counters, std::uint32_t n, std::uint32_t skipped) {
  const std::uint32_t capacity = tree.capacity;
  const std::uint32_t cursor = static_cast<std::uint32_t>(
      (std::uint64_t{counters->cursor} + skipped) % capacity);
  const std::uint64_t end = std::uint64_t{cursor} + n;
  if (end > capacity) {
    write_leaves_by_levels(tree, generations, counters, n, skipped, cursor);
    return;
  }
  const int lane = static_cast<int>(threadIdx.x);
  const int depth = tree_depth(tree);
  const std::uint32_t first = tree.leaves + cursor, last = first + n - 1;  // level-0 range
  // Lane l - 1 prefetches level l's outer children: left of the level-(l-1) range when its
  // first node is a right child, right of it when its last node is a left child.
  NodeValue outer_left{}, outer_right{};
  if (lane < depth) {
    const std::uint32_t lo = first >> lane, hi = last >> lane;
    if (lo & 1u) outer_left = {tree.sum[lo - 1], tree.min_positive[lo - 1], tree.max[lo - 1]};
    if (!(hi & 1u)) outer_right = {tree.sum[hi + 1], tree.min_positive[hi + 1], tree.max[hi + 1]};
  }
  const double p = new_leaf_priority(tree);
  __syncwarp();  // every lane has read the root (a leaf when P = 1) before any write
  NodeValue value{p, p > 0.0 ? p : __longlong_as_double(0x7ff0000000000000ll), p};
  if (static_cast<std::uint32_t>(lane) < n) {
    const std::uint32_t slot = cursor + static_cast<std::uint32_t>(lane);
    set_leaf(tree, slot, p);
    generations[slot] += (skipped + static_cast<std::uint32_t>(lane)) / capacity + 1;
  }
  for (int level = 1; level <= depth; ++level) {
    const std::uint32_t lo_below = first >> (level - 1), hi_below = last >> (level - 1);
    const std::uint32_t lo = lo_below >> 1, hi = hi_below >> 1;
    const std::uint32_t node = lo + static_cast<std::uint32_t>(lane);
    const std::uint32_t left = 2 * node, right = left + 1;
    // Every lane shuffles (full mask); lanes past the range compute values nobody uses.
    const std::uint32_t left_offset = left - lo_below, right_offset = right - lo_below;  // may wrap
    const int left_lane = left_offset < 32u ? static_cast<int>(left_offset) : 0;
    const int right_lane = right_offset < 32u ? static_cast<int>(right_offset) : 0;
    const NodeValue left_below = shfl_node(value, left_lane);
    const NodeValue right_below = shfl_node(value, right_lane);
    const NodeValue left_outer = shfl_node(outer_left, level - 1);
    const NodeValue right_outer = shfl_node(outer_right, level - 1);
    const NodeValue l = left >= lo_below ? left_below : left_outer;
    const NodeValue r = right <= hi_below ? right_below : right_outer;
    value = {l.sum + r.sum, fmin(l.min_positive, r.min_positive), fmax(l.max, r.max)};
    if (node <= hi) {
      tree.sum[node] = value.sum;
      tree.min_positive[node] = value.min_positive;
      tree.max[node] = value.max;
    }
  }
  if (lane == 0) advance_counters(counters, end, n, capacity);
}

}  // namespace

void launch_insert_transitions(ReplayStorageView storage, ReplayTreeView tree,
                               ReplayCounters* counters, const float* states,
                               const std::int32_t* actions, const float* rewards,
                               const float* next_states, const std::uint8_t* dones,
                               std::uint32_t n, std::uint32_t skipped, cudaStream_t stream) {
  const NvtxRange range("replay/insert");
  if (n == 0) return;
  const std::uint64_t total = std::uint64_t{n} * storage.state_dim;
  const unsigned blocks = grid_stride_blocks(total, 256, 4096);
  copy_rows<<<blocks, 256, 0, stream>>>(storage, counters, tree.capacity, states, actions, rewards,
                                         next_states, dones, n, skipped);
  RESIDENT_CHECK_LAUNCH("copy_rows");
  if (n <= 32) {
    write_inserted_leaves_warp<<<1, 32, 0, stream>>>(tree, storage.generations, counters, n,
                                                     skipped);
    RESIDENT_CHECK_LAUNCH("write_inserted_leaves_warp");
  } else {
    write_inserted_leaves<<<1, kTreeBlock, 0, stream>>>(tree, storage.generations, counters, n,
                                                        skipped);
    RESIDENT_CHECK_LAUNCH("write_inserted_leaves");
  }
}

}  // namespace resident::kernels
