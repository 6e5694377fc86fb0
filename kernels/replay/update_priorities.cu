// Priority update from device TD errors, one block of T threads (T = 256 for at most 256
// entries, else 512), entries taken in chunks of T (chunks in entry order, so a later chunk
// overwrites an earlier one).
//
// Entry e is writable when p = (|td_e| + eps)^alpha is finite (else counted as non-finite, even
// if also stale), its index is < size (else counted as bad), and its generation equals the
// slot's (else counted as stale). For each index only the LAST writable entry is written (the
// later entry wins; an unwritable later entry leaves an earlier one standing).
//
// Per chunk: a stable block radix sort of the writable entries by slot (unwritable ones sort
// last) puts the winner of every slot at the end of its run; the k winners, compacted in slot
// order, are the leaves to rewrite. Their ancestors are then recomputed level by level in
// shared memory: at level l the first winner of each touched node combines its two children,
// each either a touched node (its value, computed one level down, sits at the index of the
// first winner below it: the right child's first winner follows the left child's run, whose
// length is kept per first winner; a winner is first up to the level where its path meets its
// predecessor's, one clz of the two leaves) or an untouched one (read from the tree; the
// untouched siblings of every winner's path are prefetched 8 (T = 256) or 4 levels at a time,
// so the latency of a global load is paid once per batch of levels, not once per level). Node
// values are CpuSumTree::pull's (left + right, fmin, fmax) in the same order: bit-identical to
// the CPU tree. Deterministic; no atomics on the tree; no scratch outside shared memory.
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include "kernels/replay/replay_kernels.h"
#include "kernels/replay/replay_tree.cuh"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels {

namespace {

// Two block shapes: 256 threads for updates of at most 256 entries (a DQN batch: one chunk, half
// the warps of the sort and the scan), 512 for larger ones (fewer chunks, each a serial walk up
// the tree). Prefetch depth: the sibling registers a thread can hold under its launch bound.
constexpr std::uint32_t kSmallUpdate = 256;

struct NodeValue {
  double sum, min_positive, max;
};

__device__ inline double priority_of(float td_error, const ReplayParams& params) {
  return pow(fabs(static_cast<double>(td_error)) + params.epsilon, params.alpha);
}

__device__ inline NodeValue read_node(const ReplayTreeView& tree, std::uint32_t node) {
  return {tree.sum[node], tree.min_positive[node], tree.max[node]};
}

__device__ inline void write_node(const ReplayTreeView& tree, std::uint32_t node, const NodeValue& v) {
  tree.sum[node] = v.sum;
  tree.min_positive[node] = v.min_positive;
  tree.max[node] = v.max;
}

__device__ inline NodeValue combine(const NodeValue& left, const NodeValue& right) {
  return {left.sum + right.sum, fmin(left.min_positive, right.min_positive),
          fmax(left.max, right.max)};
}

// Per-winner node values of the current level, one array per field (a warp's reads of one field
// are consecutive doubles: no bank conflicts).
template <int Threads>
struct LevelValues {
  double sum[Threads], min_positive[Threads], max[Threads];
  __device__ NodeValue get(std::uint32_t i) const { return {sum[i], min_positive[i], max[i]}; }
  __device__ void set(std::uint32_t i, const NodeValue& v) {
    sum[i] = v.sum;
    min_positive[i] = v.min_positive;
    max[i] = v.max;
  }
};

template <int Threads, int PrefetchLevels>
__global__ void __launch_bounds__(Threads)
    update_priorities(ReplayTreeView tree, ReplayCounters* counters,
                      const std::uint32_t* generations_now, const std::uint32_t* indices,
                      const std::uint32_t* generations, const float* td_errors,
                      std::uint32_t count, ReplayParams params) {
  using SlotSort = cub::BlockRadixSort<std::uint32_t, Threads, 1, double>;
  using WinnerScan = cub::BlockScan<std::uint32_t, Threads>;
  __shared__ union {
    typename SlotSort::TempStorage sort;
    typename WinnerScan::TempStorage scan;
  } temp;
  __shared__ std::uint32_t sorted_slot[Threads];  // the chunk's keys after the sort
  __shared__ std::uint32_t winner_leaf[Threads];  // leaf node of winner i, ascending
  __shared__ std::uint32_t merge_level[Threads];  // lowest level where winner i's path meets i-1's
  __shared__ LevelValues<Threads> value;          // node of winner i at the current level
  __shared__ std::uint32_t run[Threads];          // winners under that node (first winner)
  __shared__ std::uint32_t winner_count;

  const std::uint32_t size = counters->size;
  const std::uint32_t unwritable = size;  // sorts after every writable slot (slot < size)
  const int end_bit = max(1, 32 - __clz(unwritable));  // the bits of `unwritable`: the passes
  const int depth = tree_depth(tree);
  const std::uint32_t t = threadIdx.x;
  std::uint64_t nonfinite = 0, stale = 0, bad = 0;

  for (std::uint32_t base = 0; base < count; base += Threads) {
    // 1. Classify this thread's entry; its key is the slot, or `unwritable`.
    const std::uint32_t e = base + t;
    std::uint32_t key[1] = {unwritable};
    double priority[1] = {0.0};
    if (e < count) {
      const std::uint32_t slot = indices[e];
      const double p = priority_of(td_errors[e], params);
      priority[0] = p;
      if (!isfinite(p))
        ++nonfinite;
      else if (slot >= size)
        ++bad;
      else if (generations[e] != generations_now[slot])
        ++stale;
      else
        key[0] = slot;
    }
    __syncthreads();  // the previous chunk's last reads of the shared arrays are done
    // 2. Stable sort by slot: within a run of equal slots the last is the latest entry.
    SlotSort(temp.sort).Sort(key, priority, 0, end_bit);
    sorted_slot[t] = key[0];
    __syncthreads();
    const bool winner = key[0] != unwritable &&
                        (t + 1 == Threads || sorted_slot[t + 1] != key[0]);
    std::uint32_t rank = 0, total = 0;
    __syncthreads();  // temp.sort is reused by the scan
    WinnerScan(temp.scan).ExclusiveSum(winner ? 1u : 0u, rank, total);
    if (winner) {
      const double p = priority[0];
      const NodeValue leaf{p, p > 0.0 ? p : __longlong_as_double(0x7ff0000000000000ll), p};
      winner_leaf[rank] = tree.leaves + key[0];
      value.set(rank, leaf);
      run[rank] = 1;
      write_node(tree, tree.leaves + key[0], leaf);
    }
    if (t == 0) winner_count = total;
    __syncthreads();

    // 3. Ancestors of the k winners, one level at a time; thread i follows winner i's path. At
    // level l, winner i is the first winner of its node iff l < merge (its node differs from
    // winner i-1's); once merged it stays merged, so a thread's own value and run live in
    // registers and go to shared memory only for the thread that reads them as a right child.
    const std::uint32_t k = winner_count;
    const std::uint32_t i = t;
    const std::uint32_t leaf = i < k ? winner_leaf[i] : 0;
    const int merge = i == 0 ? depth + 1 : 32 - __clz(leaf ^ winner_leaf[i - 1 < k ? i - 1 : 0]);
    if (i < k) merge_level[i] = static_cast<std::uint32_t>(merge);
    NodeValue mine = i < k ? value.get(i) : NodeValue{};
    std::uint32_t below = 1;
    for (int first_level = 1; first_level <= depth; first_level += PrefetchLevels) {
      NodeValue sibling[PrefetchLevels];
#pragma unroll
      for (int q = 0; q < PrefetchLevels; ++q) {
        const int level = first_level + q;
        // The sibling of this path's level-(level-1) node, on the levels where this winner is
        // the first of its node; used only when it is untouched (then nothing writes it during
        // this kernel).
        if (i < k && level <= depth && level < merge)
          sibling[q] = read_node(tree, (leaf >> (level - 1)) ^ 1u);
      }
#pragma unroll
      for (int q = 0; q < PrefetchLevels; ++q) {
        const int level = first_level + q;
        if (level > depth) break;
        __syncthreads();  // level - 1 is complete in value[], run[] (and merge_level[])
        if (i >= k || level >= merge) continue;  // no winner, or not its node's first
        const std::uint32_t node = leaf >> level;
        const std::uint32_t child = leaf >> (level - 1);
        NodeValue left, right;
        if ((child & 1u) == 0) {
          left = mine;
          // The first winner after the left child's run is under the right child iff its path
          // meets its predecessor's (in the left child) at this level or below.
          const std::uint32_t j = i + below;
          if (j < k && merge_level[j] <= static_cast<std::uint32_t>(level)) {
            right = value.get(j);
            below += run[j];
          } else {
            right = sibling[q];
          }
        } else {
          left = sibling[q];
          right = mine;
        }
        // Only first winners write, each its own index; the indices read above belong to
        // winners that are not first at this level: no conflict within a level.
        mine = combine(left, right);
        value.set(i, mine);
        run[i] = below;
        write_node(tree, node, mine);
      }
    }
  }
  if (nonfinite) atomicAdd(reinterpret_cast<unsigned long long*>(&counters->nonfinite), nonfinite);
  if (stale) atomicAdd(reinterpret_cast<unsigned long long*>(&counters->stale), stale);
  if (bad) atomicAdd(reinterpret_cast<unsigned long long*>(&counters->bad_index), bad);
}

}  // namespace

void launch_update_priorities(ReplayTreeView tree, ReplayCounters* counters,
                              const std::uint32_t* generations_now, const std::uint32_t* indices,
                              const std::uint32_t* generations, const float* td_errors,
                              std::uint32_t count, ReplayParams params, cudaStream_t stream) {
  const NvtxRange range("replay/update_priorities");
  if (count == 0) return;
  if (count <= kSmallUpdate)
    update_priorities<kSmallUpdate, 8><<<1, kSmallUpdate, 0, stream>>>(
        tree, counters, generations_now, indices, generations, td_errors, count, params);
  else
    update_priorities<512, 4><<<1, 512, 0, stream>>>(tree, counters, generations_now, indices,
                                                     generations, td_errors, count, params);
  RESIDENT_CHECK_LAUNCH("update_priorities");
}

}  // namespace resident::kernels
