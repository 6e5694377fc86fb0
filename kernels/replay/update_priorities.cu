// Priority update from device TD errors, one block of kUpdateThreads, entries taken in chunks of
// kUpdateThreads (chunks in entry order, so a later chunk overwrites an earlier one).
//
// Entry e is writable when p = (|td_e| + eps)^alpha is finite (else counted as non-finite, even
// if also stale), its index is < size (else counted as bad), and its generation equals the
// slot's (else counted as stale). For each index only the LAST writable entry is written (the
// later entry wins; an unwritable later entry leaves an earlier one standing).
//
// Per chunk: a stable block radix sort of the writable entries by slot (unwritable ones sort
// last) puts the winner of every slot at the end of its run; the k winners, compacted in slot
// order, write their leaves. Their ancestors are then recomputed in passes of up to
// kPassLevels = 5 levels: a pass from level b covers the aligned groups of 2^L nodes at level b
// (L = min(5, depth - b)) that hold a touched node; one warp loads a group (lane j: node
// (g << L) + j of level b, touched ones written by the previous pass or the leaf step) and folds
// it in L shuffle steps, lane j combining with lane j + 2^(s-1) at step s, which are exactly
// CpuSumTree::pull's pairs (left + right, fmin, fmax) in its order: every node gets the CPU
// tree's bits. A group's internal nodes are all rewritten (an untouched one with the value it
// already holds). Depth 20 (10^6 slots) takes 4 passes with 4 block barriers instead of 20
// levels with one each. Deterministic; no atomics on the tree; no scratch outside shared memory.
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include "kernels/replay/replay_kernels.h"
#include "kernels/replay/replay_tree.cuh"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr int kUpdateThreads = 512;
constexpr int kWarps = kUpdateThreads / 32;
constexpr int kPassLevels = 5;      // 2^5 = 32 nodes: one per lane
constexpr int kGroupsPerBatch = 4;  // groups a warp loads before folding any (one round trip)

using SlotSort = cub::BlockRadixSort<std::uint32_t, kUpdateThreads, 1, double>;
using WinnerScan = cub::BlockScan<std::uint32_t, kUpdateThreads>;

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

__device__ inline NodeValue shuffle_down(const NodeValue& v, unsigned delta) {
  return {__shfl_down_sync(0xffffffffu, v.sum, delta),
          __shfl_down_sync(0xffffffffu, v.min_positive, delta),
          __shfl_down_sync(0xffffffffu, v.max, delta)};
}

__global__ void __launch_bounds__(kUpdateThreads, 1)
    update_priorities(ReplayTreeView tree, ReplayCounters* counters,
                      const std::uint32_t* generations_now, const std::uint32_t* indices,
                      const std::uint32_t* generations, const float* td_errors,
                      std::uint32_t count, ReplayParams params) {
  __shared__ union {
    typename SlotSort::TempStorage sort;
    typename WinnerScan::TempStorage scan;
  } temp;
  __shared__ std::uint32_t sorted_slot[kUpdateThreads];  // the chunk's keys after the sort
  __shared__ std::uint32_t winner_leaf[kUpdateThreads];  // leaf node of winner i, ascending
  __shared__ std::uint32_t group[kUpdateThreads];        // a pass's groups, ascending
  __shared__ std::uint32_t winner_count, group_count;

  const std::uint32_t size = counters->size;
  const std::uint32_t unwritable = tree.leaves;  // sorts after every slot (slot < size <= P)
  int end_bit = 1;
  while ((1u << end_bit) <= unwritable && end_bit < 32) ++end_bit;
  const int depth = tree_depth(tree);
  const std::uint32_t t = threadIdx.x;
  std::uint64_t nonfinite = 0, stale = 0, bad = 0;

  for (std::uint32_t base = 0; base < count; base += kUpdateThreads) {
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
    __syncthreads();  // the previous chunk's last reads of winner_leaf/group are done
    // 2. Stable sort by slot: within a run of equal slots the last is the latest entry.
    SlotSort(temp.sort).Sort(key, priority, 0, end_bit);
    sorted_slot[t] = key[0];
    __syncthreads();
    const bool winner = key[0] != unwritable &&
                        (t + 1 == kUpdateThreads || sorted_slot[t + 1] != key[0]);
    std::uint32_t rank = 0, total = 0;
    __syncthreads();  // temp.sort is reused by the scan
    WinnerScan(temp.scan).ExclusiveSum(winner ? 1u : 0u, rank, total);
    if (winner) {
      const double p = priority[0];
      const NodeValue leaf{p, p > 0.0 ? p : __longlong_as_double(0x7ff0000000000000ll), p};
      winner_leaf[rank] = tree.leaves + key[0];
      write_node(tree, tree.leaves + key[0], leaf);
    }
    if (t == 0) winner_count = total;
    __syncthreads();

    // 3. Ancestors of the k winners, in passes of up to kPassLevels levels.
    const std::uint32_t k = winner_count;
    const std::uint32_t lane = t % 32, warp = t / 32;
    for (int bottom = 0; bottom < depth; bottom += kPassLevels) {
      const int levels = depth - bottom < kPassLevels ? depth - bottom : kPassLevels;
      const int shift = bottom + levels;  // a group is the node of level `shift` above it
      // The distinct groups of this pass, in ascending order (winners are sorted by leaf).
      const bool first =
          t < k && (t == 0 || (winner_leaf[t - 1] >> shift) != (winner_leaf[t] >> shift));
      std::uint32_t slot_in_list = 0, groups = 0;
      WinnerScan(temp.scan).ExclusiveSum(first ? 1u : 0u, slot_in_list, groups);
      if (first) group[slot_in_list] = winner_leaf[t] >> shift;
      if (t == 0) group_count = groups;
      __syncthreads();  // group[] complete; the previous pass's node writes visible
      const std::uint32_t width = 1u << levels;
      for (std::uint32_t g0 = warp; g0 < group_count; g0 += kWarps * kGroupsPerBatch) {
        NodeValue node_value[kGroupsPerBatch] = {};
#pragma unroll
        for (int q = 0; q < kGroupsPerBatch; ++q) {
          const std::uint32_t gi = g0 + q * kWarps;
          if (gi < group_count && lane < width)
            node_value[q] = read_node(tree, (group[gi] << levels) + lane);  // level `bottom`
        }
#pragma unroll
        for (int q = 0; q < kGroupsPerBatch; ++q) {
          const std::uint32_t gi = g0 + q * kWarps;
          if (gi >= group_count) break;  // uniform across the warp
          NodeValue x = node_value[q];
          for (int step = 1; step <= levels; ++step) {
            const NodeValue right = shuffle_down(x, 1u << (step - 1));
            if ((lane & ((1u << step) - 1u)) == 0 && lane < width) {
              x = combine(x, right);  // lane j: left child j, right child j + 2^(step-1)
              write_node(tree, (group[gi] << (levels - step)) + (lane >> step), x);
            }
          }
        }
      }
      __syncthreads();  // this pass's writes before the next pass reads; temp.scan reuse
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
  update_priorities<<<1, kUpdateThreads, 0, stream>>>(tree, counters, generations_now, indices,
                                                       generations, td_errors, count, params);
  RESIDENT_CHECK_LAUNCH("update_priorities");
}

}  // namespace resident::kernels
