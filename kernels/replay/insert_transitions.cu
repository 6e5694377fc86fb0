// Insert of a batch at the device cursor (ring buffer, wrap-around), as CpuReplayBuffer does it
// row by row: row r of the batch goes to slot (cursor + r) % capacity. Of a batch longer than
// the capacity only the last n = capacity rows survive; the caller passes those rows and
// `skipped`, the number of earlier rows, so that kept row j lands on slot
// (cursor + skipped + j) % capacity and that slot's generation grows by the number of rows of
// the whole batch that wrote it, (skipped + j) / capacity + 1.
//
// n <= 64 rows of at most 16384 elements in all (a DQN vector step): one launch of one
// 256-thread block in which warp 0 writes the leaves and recomputes the kept levels (one pass
// of 8 quads per level, __syncwarp between levels) while warps 1-7 copy the rows: the copy
// hides under the tree's dependent loads. Larger batches: copy_rows (one warp per row, or a
// block per row wider than 1024 elements; grid-stride) and then write_inserted_leaves (one
// 1024-thread block, every quad on the tree, a block barrier between levels) without the copy.
// write_inserted_leaves reads the live maximum priority (the max tree's root; 1.0 when no leaf
//   is positive) before touching any leaf, sets the n leaves to it, bumps their generations,
//   then recomputes the kept levels above them (replay_tree.cuh), and finally advances cursor by
//   skipped + n and size. Rows, leaves and generations are overwritten.
// Deterministic: every kept node is recomputed from its descendants, never accumulated.
#include "kernels/replay/replay_kernels.h"
#include "kernels/replay/inserted_leaves.cuh"
#include "kernels/replay/replay_tree.cuh"
#include "kernels/replay/write_rows.cuh"
#include "kernels/core/launch_config.h"
#include "kernels/core/programmatic_launch.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr int kTreeBlock = 1024;
// Batches the tree kernel copies itself: at most 64 rows and 16384 state elements (a DQN vector
// step is 32 x 64); larger batches go to copy_rows' grid.
constexpr std::uint32_t kSmallInsert = 64;
constexpr std::uint64_t kSmallInsertElements = 16384;
constexpr int kSmallInsertBlock = 256;
constexpr std::uint64_t kWideRow = 1024;  // copy_rows: wider rows get a block each

__global__ void copy_rows(ReplayStorageView storage, const ReplayCounters* counters,
                          std::uint32_t capacity, TransitionRowsView rows, std::uint32_t n,
                          std::uint32_t skipped) {
  const std::uint32_t cursor = static_cast<std::uint32_t>(
      (std::uint64_t{counters->cursor} + skipped) % capacity);
  // A row per warp; rows wider than kWideRow elements a row per block (one warp would serialize).
  const std::uint32_t group_size = storage.state_dim > kWideRow ? blockDim.x : 32;
  const std::uint32_t groups_per_block = blockDim.x / group_size;
  write_rows_by_group(storage, capacity, cursor, rows, n,
                     blockIdx.x * groups_per_block + threadIdx.x / group_size,
                     gridDim.x * groups_per_block, threadIdx.x % group_size, group_size);
}

// The leaves, generations and kept levels (replay_tree.cuh) lowest first, by a team of lanes:
// warp 0 alone when copy_rows_too (the other warps then copy the rows meanwhile), else the
// whole block. Each kept level's touched nodes are one or two contiguous ranges (before and
// after a wrap), each node recomputed by one quad of the team, the team synchronized between
// levels. Any block size that is a multiple of 32 (at least 64 with copy_rows_too).
__global__ void __launch_bounds__(kTreeBlock)
    write_inserted_leaves(ReplayStorageView storage, ReplayTreeView tree, ReplayCounters* counters,
                          TransitionRowsView rows, bool copy_rows_too, std::uint32_t n,
                          std::uint32_t skipped) {
  allow_next_kernel_to_start();  // the draw after an insert may schedule its blocks
  const std::uint32_t capacity = tree.capacity;
  const std::uint32_t cursor = static_cast<std::uint32_t>(
      (std::uint64_t{counters->cursor} + skipped) % capacity);
  const bool warp_team = copy_rows_too;  // block-uniform
  const std::uint32_t team_size = warp_team ? 32 : blockDim.x;
  const auto team_sync = [warp_team] {
    if (warp_team)
      __syncwarp();
    else
      __syncthreads();
  };
  const std::uint64_t end = std::uint64_t{cursor} + n;
  if (threadIdx.x < team_size) {
    // The root (a leaf when P = 1) is read by every team lane before any leaf is written.
    const double new_priority = new_leaf_priority(tree);
    team_sync();
    std::uint32_t* generations = storage.generations;
    for (std::uint32_t i = threadIdx.x; i < n; i += team_size) {
      const std::uint32_t slot =
          static_cast<std::uint32_t>((std::uint64_t{cursor} + i) % capacity);
      set_leaf(tree, slot, new_priority);
      generations[slot] += (skipped + i) / capacity + 1;
    }
    // Touched leaves: [cursor, cursor + n) before the wrap, [0, end - capacity) after it.
    const std::uint32_t first_hi = static_cast<std::uint32_t>(end < capacity ? end : capacity);
    const std::uint32_t second_hi =
        static_cast<std::uint32_t>(end > capacity ? end - capacity : 0);
    const std::uint32_t quads = team_size / kLanesPerKeptNode;
    const std::uint32_t quad = threadIdx.x / kLanesPerKeptNode;
    const int depth = tree_depth(tree);
    for (int below = 0; below < depth;) {
      const int r = kept_step(below, depth);
      const int height = below + r;
      team_sync();  // the kept level `below` is final
      const std::uint32_t lo1 = (tree.leaves + cursor) >> height;
      const std::uint32_t hi1 = (tree.leaves + first_hi - 1) >> height;
      const std::uint32_t lo2 = tree.leaves >> height;
      const std::uint32_t hi2 = second_hi > 0 ? (tree.leaves + second_hi - 1) >> height : lo2 - 1;
      const std::uint32_t count1 = hi1 - lo1 + 1, count2 = hi2 + 1 - lo2;
      for (std::uint32_t first = 0; first < count1 + count2; first += quads) {  // team-uniform
        const std::uint32_t item = first + quad;
        const std::uint32_t node = item < count1 ? lo1 + item : lo2 + (item - count1);
        // A node of the second range inside the first is the first range's to recompute.
        const bool active =
            item < count1 || (item < count1 + count2 && (node < lo1 || node > hi1));
        pull_kept_node_by_quad(tree, node, r, active);
      }
      below = height;
    }
  } else {
    write_rows_by_group(storage, capacity, cursor, rows, n, threadIdx.x / 32 - 1,
                       blockDim.x / 32 - 1, threadIdx.x % 32, 32);
  }
  __syncthreads();  // every thread has read counters->cursor
  if (threadIdx.x == 0) advance_counters(counters, end, n, capacity);
}

}  // namespace

void launch_insert_transitions(ReplayStorageView storage, ReplayTreeView tree,
                               ReplayCounters* counters, TransitionRowsView rows, std::uint32_t n,
                               std::uint32_t skipped, cudaStream_t stream) {
  const NvtxRange range("replay/insert");
  if (n == 0) return;
  const std::uint64_t total = std::uint64_t{n} * storage.state_dim;
  if (n <= kSmallInsert && total <= kSmallInsertElements) {  // rows, leaves, tree: one launch
    write_inserted_leaves<<<1, kSmallInsertBlock, 0, stream>>>(storage, tree, counters, rows,
                                                               true, n, skipped);
    RESIDENT_CHECK_LAUNCH("write_inserted_leaves");
    return;
  }
  constexpr unsigned kCopyBlock = 256;  // 8 rows at a time (1 when wider than kWideRow)
  const unsigned rows_per_block = storage.state_dim > kWideRow ? 1 : kCopyBlock / 32;
  const unsigned blocks = grid_stride_blocks(n, rows_per_block, 4096);
  copy_rows<<<blocks, kCopyBlock, 0, stream>>>(storage, counters, tree.capacity, rows, n, skipped);
  RESIDENT_CHECK_LAUNCH("copy_rows");
  write_inserted_leaves<<<1, kTreeBlock, 0, stream>>>(storage, tree, counters, TransitionRowsView{},
                                                      false, n, skipped);
  RESIDENT_CHECK_LAUNCH("write_inserted_leaves");
}

void launch_insert_leaves(ReplayStorageView storage, ReplayTreeView tree, ReplayCounters* counters,
                          std::uint32_t n, cudaStream_t stream) {
  const NvtxRange range("replay/insert_leaves");
  if (n == 0) return;
  if (n <= kFewLeaves) {  // a DQN vector step: every kept level's loads in one wave
    launch_insert_few_leaves(tree, storage.generations, counters, n, stream);
    return;
  }
  write_inserted_leaves<<<1, kTreeBlock, 0, stream>>>(storage, tree, counters,
                                                      TransitionRowsView{}, false, n, 0);
  RESIDENT_CHECK_LAUNCH("write_inserted_leaves");
}

}  // namespace resident::kernels
