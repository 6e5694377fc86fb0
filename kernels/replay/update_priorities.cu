// Priority update from device TD errors, one block.
//
// Entry e (in order) is writable when p = (|td_e| + eps)^alpha is finite (else counted as
// non-finite, even if also stale), its index is < size (else counted as bad), and its
// generation equals the slot's (else counted as stale). For each index only the LAST
// writable entry is written (the later entry wins; an unwritable later entry leaves an
// earlier one standing), chosen with atomicMax on the `owner` scratch, which is reset to -1
// before the kernel ends. Then every written leaf's ancestors are recomputed level by level.
// Deterministic: the winner is fixed by entry order, nodes are recomputed, not accumulated.
#include "kernels/replay/replay_kernels.h"
#include "kernels/replay/replay_tree.cuh"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr int kUpdateBlock = 1024;

__device__ inline double priority_of(float td_error, const ReplayParams& params) {
  return pow(fabs(static_cast<double>(td_error)) + params.epsilon, params.alpha);
}

__global__ void __launch_bounds__(kUpdateBlock)
    update_priorities(ReplayTreeView tree, ReplayCounters* counters, std::int32_t* owner,
                      const std::uint32_t* generations_now, const std::uint32_t* indices,
                      const std::uint32_t* generations, const float* td_errors,
                      std::uint32_t count, ReplayParams params) {
  const std::uint32_t size = counters->size;
  std::uint64_t nonfinite = 0, stale = 0, bad = 0;
  // Pass 1: claim each slot for its last writable entry.
  for (std::uint32_t e = threadIdx.x; e < count; e += blockDim.x) {
    const std::uint32_t slot = indices[e];
    const double p = priority_of(td_errors[e], params);
    if (!isfinite(p)) {
      ++nonfinite;
    } else if (slot >= size) {
      ++bad;
    } else if (generations[e] != generations_now[slot]) {
      ++stale;
    } else {
      atomicMax(&owner[slot], static_cast<std::int32_t>(e));
    }
  }
  if (nonfinite) atomicAdd(reinterpret_cast<unsigned long long*>(&counters->nonfinite), nonfinite);
  if (stale) atomicAdd(reinterpret_cast<unsigned long long*>(&counters->stale), stale);
  if (bad) atomicAdd(reinterpret_cast<unsigned long long*>(&counters->bad_index), bad);
  __syncthreads();
  // Pass 2: winners write their leaves.
  for (std::uint32_t e = threadIdx.x; e < count; e += blockDim.x) {
    const std::uint32_t slot = indices[e];
    if (slot < size && owner[slot] == static_cast<std::int32_t>(e))
      set_leaf(tree, slot, priority_of(td_errors[e], params));
  }
  // Pass 3: ancestors, level by level (a node may be recomputed by several entries: same value).
  const int depth = tree_depth(tree);
  for (int level = 1; level <= depth; ++level) {
    __syncthreads();
    for (std::uint32_t e = threadIdx.x; e < count; e += blockDim.x) {
      const std::uint32_t slot = indices[e];
      if (slot < size && owner[slot] == static_cast<std::int32_t>(e))
        pull_node(tree, (tree.leaves + slot) >> level);
    }
  }
  __syncthreads();
  // Pass 4: release the claims.
  for (std::uint32_t e = threadIdx.x; e < count; e += blockDim.x) {
    const std::uint32_t slot = indices[e];
    if (slot < size) owner[slot] = -1;
  }
}

}  // namespace

void launch_update_priorities(ReplayTreeView tree, ReplayCounters* counters,
                              std::int32_t* owner, const std::uint32_t* generations_now,
                              const std::uint32_t* indices, const std::uint32_t* generations,
                              const float* td_errors, std::uint32_t count, ReplayParams params,
                              cudaStream_t stream) {
  const NvtxRange range("replay/update_priorities");
  if (count == 0) return;
  update_priorities<<<1, kUpdateBlock, 0, stream>>>(tree, counters, owner, generations_now,
                                                     indices, generations, td_errors, count,
                                                     params);
  RESIDENT_CHECK_LAUNCH("update_priorities");
}

}  // namespace resident::kernels
