// Insert of a batch at the device cursor (ring buffer, wrap-around), as CpuReplayBuffer does it
// row by row: row r of the batch goes to slot (cursor + r) % capacity. Of a batch longer than
// the capacity only the last n = capacity rows survive; the caller passes those rows and
// `skipped`, the number of earlier rows, so that kept row j lands on slot
// (cursor + skipped + j) % capacity and that slot's generation grows by the number of rows of
// the whole batch that wrote it, (skipped + j) / capacity + 1.
//
// copy_rows: one thread per (row, state element). Overwrites the slots' rows.
// write_inserted_leaves: one block. Reads the live maximum priority (the max tree's root; 1.0
//   when no leaf is positive) before touching any leaf, sets the n leaves to it, bumps their
//   generations, then recomputes the ancestors level by level (each level's touched nodes are
//   one or two contiguous ranges), and finally advances cursor by skipped + n and size.
// Deterministic: every node is recomputed from its children, never accumulated.
#include "kernels/replay/replay_kernels.h"
#include "kernels/replay/replay_tree.cuh"
#include "kernels/core/launch_config.h"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr int kTreeBlock = 1024;

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

__global__ void __launch_bounds__(kTreeBlock)
    write_inserted_leaves(ReplayTreeView tree, std::uint32_t* generations,
                          ReplayCounters* counters, std::uint32_t n, std::uint32_t skipped) {
  __shared__ double new_priority;
  const std::uint32_t capacity = tree.capacity;
  const std::uint32_t cursor = static_cast<std::uint32_t>(
      (std::uint64_t{counters->cursor} + skipped) % capacity);
  if (threadIdx.x == 0) {
    const double live_max = tree.max[1];
    new_priority = live_max > 0.0 ? live_max : 1.0;
  }
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
  if (threadIdx.x == 0) {
    counters->cursor = static_cast<std::uint32_t>(end % capacity);  // cursor + skipped + n
    const std::uint64_t size = std::uint64_t{counters->size} + n;
    counters->size = static_cast<std::uint32_t>(size < capacity ? size : capacity);
  }
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
  write_inserted_leaves<<<1, kTreeBlock, 0, stream>>>(tree, storage.generations, counters, n,
                                                      skipped);
  RESIDENT_CHECK_LAUNCH("write_inserted_leaves");
}

}  // namespace resident::kernels
