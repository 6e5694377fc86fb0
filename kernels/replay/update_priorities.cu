// Priority update from device TD errors: one cluster of kClusterBlocks blocks of kThreads
// threads (sm_90 thread-block cluster, one block per SM), the entries taken in chunks of kThreads
// in entry order (a later chunk overwrites an earlier one).
//
// Entry e is writable when p = (|td_e| + eps)^alpha is finite (else counted as non-finite, even
// if also stale), its index is < size (else counted as bad), and its generation equals the
// slot's (else counted as stale). For each index only the LAST writable entry is written (the
// later entry wins; an unwritable later entry leaves an earlier one standing).
//
// Per chunk, every block of the cluster classifies all the chunk's entries (the same result in
// each: counters are added by block 0 only): the writable entries claim their slot in a
// shared-memory hash table (open addressing; the entry with the largest position in the chunk
// owns the slot: atomicMax), the owners' leaves are written (entry t by block t % kClusterBlocks),
// then the kept levels above them (replay_tree.cuh: heights 5, 10, ..., the root) are
// recomputed one kept level at a time, a cluster barrier (release/acquire) between kept levels:
// 4 barriers at 2^20 leaves instead of 20. Each touched node is recomputed from its 32 (or, for
// the root's group, 2^(depth % 5)) descendants by one warp of the cluster (warp w of the cluster
// takes entries w, w + kNodesPerPass, ...): its loads are one coalesced round trip, spread over
// the cluster's SMs (a single block's 12 loads per quad lane went out in ~5 dependent waves on
// one SM). At the levels of at most kClaimNodes nodes a node touched by several of a block's
// entries is recomputed once per block (the warp that first tags it in the block's claim array
// leads; the tag names the chunk and the height, so the array is never cleared); below them and
// across blocks a node may be recomputed more than once, always from the same final
// descendants, so every write of it stores the same bits.
// Bit-identical to CpuSumTree's nodes at the kept heights; deterministic; no atomics on the tree;
// no scratch outside shared memory.
#include <cooperative_groups.h>

#include "kernels/core/phase_clock.cuh"
#include "kernels/core/programmatic_launch.cuh"
#include "kernels/replay/replay_kernels.h"
#include "kernels/replay/replay_tree.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr int kThreads = 1024;
constexpr int kClusterBlocks = 8;                      // the portable cluster size
constexpr int kNodesPerPass = kClusterBlocks * kThreads / 32;  // one node per warp of the cluster
constexpr int kTableSize = 2 * kThreads;              // hash buckets: at most half full
constexpr std::uint32_t kEmpty = 0xffffffffu;         // a bucket without a slot; also "no leaf"
constexpr int kClaimLog2 = 12;                         // levels of <= 4096 nodes: block-wide
constexpr std::uint32_t kClaimNodes = 1u << kClaimLog2;
constexpr unsigned kFullMask = 0xffffffffu;

__device__ inline double priority_of(float td_error, const ReplayParams& params) {
  return pow(fabs(static_cast<double>(td_error)) + params.epsilon, params.alpha);
}

__device__ inline std::uint32_t bucket_of(std::uint32_t slot) {
  return (slot * 2654435761u) % kTableSize;  // Knuth's multiplicative hash
}

__global__ void __cluster_dims__(kClusterBlocks, 1, 1) __launch_bounds__(kThreads)
    update_priorities(ReplayTreeView tree, ReplayCounters* counters,
                      const std::uint32_t* generations_now, const std::uint32_t* indices,
                      const std::uint32_t* generations, const float* td_errors,
                      std::uint32_t count, ReplayParams params, std::uint64_t* phase_times) {
  __shared__ std::uint32_t bucket_slot[kTableSize];   // the slot a bucket holds, or kEmpty
  __shared__ std::uint32_t bucket_owner[kTableSize];  // 1 + the chunk position of its last entry
  __shared__ std::uint32_t owned_leaf[kThreads];      // leaf node entry t wrote, or kEmpty
  __shared__ std::uint32_t node_claim[kClaimNodes];   // the tag of the last level that took it

  PhaseClock clock{phase_times};  // block 0, the first chunk only (launch_update_priorities)
  clock.mark();
  allow_next_kernel_to_start();
  for (std::uint32_t i = threadIdx.x; i < kClaimNodes; i += kThreads) node_claim[i] = kEmpty;
  wait_for_prior_kernel();  // launched after the draw (launch_after_prior)
  clock.mark();

  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const std::uint32_t rank = cluster.block_rank();
  const std::uint32_t size = counters->size;
  const int depth = tree_depth(tree);
  const std::uint32_t t = threadIdx.x;
  std::uint64_t nonfinite = 0, stale = 0, bad = 0;

  for (std::uint32_t base = 0; base < count; base += kThreads) {
    const std::uint32_t chunk = min(count - base, static_cast<std::uint32_t>(kThreads));
    // 1. Classify this thread's entry.
    const std::uint32_t e = base + t;
    bool writable = false;
    std::uint32_t slot = 0;
    double priority = 0.0;
    if (t < chunk) {
      slot = indices[e];
      const float td_error = td_errors[e];
      const std::uint32_t drawn_generation = generations[e];
      // The slot's generation now, loaded before the pow so the two overlap (an index past the
      // size loads slot 0's, unused: it is counted as bad).
      const std::uint32_t generation_now = generations_now[slot < size ? slot : 0u];
      priority = priority_of(td_error, params);
      if (!isfinite(priority))
        ++nonfinite;
      else if (slot >= size)
        ++bad;
      else if (drawn_generation != generation_now)
        ++stale;
      else
        writable = true;
    }
    for (std::uint32_t b = t; b < kTableSize; b += kThreads) {
      bucket_slot[b] = kEmpty;
      bucket_owner[b] = 0;
    }
    __syncthreads();  // the table is empty (and the previous chunk's last level is done)
    const auto mark = [&] {
      if (base == 0) clock.mark();
    };
    mark();
    // 2. Claim: the first probe of a slot's sequence that is empty or holds it is its bucket
    // (the same for every entry of that slot: buckets never change once filled).
    std::uint32_t bucket = 0;
    if (writable) {
      bucket = bucket_of(slot);
      for (;;) {
        const std::uint32_t held = atomicCAS(&bucket_slot[bucket], kEmpty, slot);
        if (held == kEmpty || held == slot) break;
        bucket = (bucket + 1) % kTableSize;
      }
      atomicMax(&bucket_owner[bucket], t + 1);
    }
    __syncthreads();
    mark();
    // 3. The owner of each slot writes its leaf.
    const bool owner = writable && bucket_owner[bucket] == t + 1;
    owned_leaf[t] = owner ? tree.leaves + slot : kEmpty;
    if (owner && t % kClusterBlocks == rank) set_leaf(tree, slot, priority);
    // 4. Kept levels, lowest first; warp w of the cluster recomputes the ancestors of entries
    // w, w + kNodesPerPass, ...
    const std::uint32_t warp = rank * (kThreads / 32) + t / 32;
    mark();
    for (int below = 0; below < depth;) {
      const int r = kept_step(below, depth);
      const int height = below + r;
      const bool claim_level = depth - height <= kClaimLog2;  // uniform across the block
      // Chunks of one call are < 2^22 (count is 32-bit, kThreads = 2^10) and heights < 32.
      const std::uint32_t tag = (base / kThreads) << 5 | static_cast<std::uint32_t>(height);
      cluster.sync();  // the kept level `below` is final in every block (leaves at first)
      mark();
      for (std::uint32_t first = 0; first < chunk; first += kNodesPerPass) {  // uniform
        const std::uint32_t j = first + warp;
        const std::uint32_t leaf = j < chunk ? owned_leaf[j] : kEmpty;
        const std::uint32_t node = leaf == kEmpty ? kEmpty : leaf >> height;  // uniform per warp
        if (node == kEmpty) continue;
        if (claim_level) {
          // The warp whose lane 0 tags the node first at this level (in this block) leads.
          bool took = false;
          if (t % 32 == 0)
            took = atomicExch(&node_claim[node - (tree.leaves >> height)], tag) != tag;
          if (!__shfl_sync(kFullMask, took, 0)) continue;
        }
        pull_kept_node_by_warp(tree, node, r);
      }
      mark();
      below = height;
    }
    // owned_leaf and the table are read, and the last level written in every block, before the
    // next chunk overwrites the table and its leaves (a short tree's root group reads leaves).
    // After the last chunk no block waits: the kernel's end orders its writes for later work.
    if (count - base > static_cast<std::uint32_t>(kThreads)) cluster.sync();  // uniform
  }
  if (rank != 0) return;  // every block counted the same entries
  if (nonfinite) atomicAdd(reinterpret_cast<unsigned long long*>(&counters->nonfinite), nonfinite);
  if (stale) atomicAdd(reinterpret_cast<unsigned long long*>(&counters->stale), stale);
  if (bad) atomicAdd(reinterpret_cast<unsigned long long*>(&counters->bad_index), bad);
  clock.mark();
}

}  // namespace

void launch_update_priorities(ReplayTreeView tree, ReplayCounters* counters,
                              const std::uint32_t* generations_now, const std::uint32_t* indices,
                              const std::uint32_t* generations, const float* td_errors,
                              std::uint32_t count, ReplayParams params, cudaStream_t stream,
                              std::uint64_t* phase_times) {
  const NvtxRange range("replay/update_priorities");
  if (count == 0) return;
  launch_after_prior({dim3(kClusterBlocks), dim3(kThreads)}, stream, update_priorities, tree,
                     counters, generations_now, indices, generations, td_errors, count, params,
                     phase_times);
  RESIDENT_CHECK_LAUNCH("update_priorities");
}

}  // namespace resident::kernels
