// Proportional prioritized draws: one warp per draw.
// Draw k descends the sum tree from the root with mass m: left when m < sum(left), else right
// (m -= sum(left)) unless the right subtree is empty (rounding past the end), exactly as
// CpuSumTree::find_prefix_sum, so intervals are half-open [c_{i-1}, c_i) and zero leaves are
// never drawn. The warp descends five levels per global load: it loads the 32 descendants five
// levels down (one coalesced load), rebuilds the four levels in between with butterfly
// additions, which pair the same operands as the stored nodes and so reproduce them bit for
// bit, and walks them in registers. IS weight: (P(i) / P_min)^-beta, P = p / total, P_min from
// the min tree. The same warp copies the drawn row into `rows` (copy_row_by_warp), its loads in
// flight with the draw's generation while lane 0 computes the weight (the leaf's priority comes
// from the descent's registers). Outputs [batch] overwritten.
// After a split insert (launch_insert_leaves: leaves, generations and cursor already written)
// the draw also writes that insert's pending rows to their slots, row j of block b's step warp
// for j = b, b + grid, ... (before it waits for the block's draw warps), and a draw warp whose
// slot is one of them copies the row from pending_rows instead: nothing in the kernel reads a
// slot's row that it writes, so the outputs equal an insert's followed by the draw, bit for bit.
// A draw ahead (rows.states null, no pending rows) writes the indices, generations and weights
// only; launch_gather_rows copies the rows later (and writes the split insert's pending rows).
// The device step advances by one once every draw has read it, off the draws' path: each block
// has one more warp, the step warp, which waits at a named barrier until the block's draw warps
// have read the step (they arrive without waiting), counts the block in (fence, atomic add), and
// in the block counted last advances it; the draw warps never wait for it.
#include "kernels/core/phase_clock.cuh"
#include "kernels/core/programmatic_launch.cuh"
#include "kernels/replay/gather_row.cuh"
#include "kernels/replay/pending_slots.cuh"
#include "kernels/replay/replay_sampling.cuh"
#include "kernels/replay/write_rows.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr int kWarpsPerBlock = 8;                         // draw warps
constexpr int kThreadsPerBlock = (kWarpsPerBlock + 1) * 32;  // and the step warp
constexpr int kStepReadBarrier = 1;  // named barrier: the draw warps have read the step
constexpr unsigned kFullMask = 0xffffffffu;

// Descends R levels below `node` (R <= 5), updating node and mass as the binary descent would;
// returns the sum of the node it arrives at (as stored: the loaded value, no rebuild).
template <int R>
__device__ inline double descend_levels(const double* sum, std::uint32_t& node, double& mass,
                                        int lane) {
  constexpr int kWidth = 1 << R;
  const std::uint32_t first = node << R;  // leftmost descendant R levels down
  double group[R + 1];                    // group[m]: sum of the aligned 2^m lanes around lane
  group[0] = lane < kWidth ? sum[first + static_cast<std::uint32_t>(lane)] : 0.0;
#pragma unroll
  for (int m = 1; m <= R; ++m)
    group[m] = group[m - 1] + __shfl_xor_sync(kFullMask, group[m - 1], 1 << (m - 1));
  int offset = 0;  // leftmost lane of the current subtree
#pragma unroll
  for (int level = 0; level < R; ++level) {
    constexpr int kTop = R - 1;
    const int half = 1 << (kTop - level);
    const double left = __shfl_sync(kFullMask, group[kTop - level], offset);
    const double right = __shfl_sync(kFullMask, group[kTop - level], offset + half);
    if (!(mass < left) && right > 0.0) {
      mass -= left;
      offset += half;
    }
  }
  node = first + static_cast<std::uint32_t>(offset);
  return __shfl_sync(kFullMask, group[0], offset);
}

// The slot the mass falls in; `leaf` (in: the root's sum) ends as that slot's leaf priority (a
// one-slot tree's leaf is its root). Marks the clock after each group's descent.
__device__ inline std::uint32_t find_prefix_sum(const ReplayTreeView& tree, double mass, int lane,
                                                double& leaf, PhaseClock& clock) {
  const int depth = tree_depth(tree);
  std::uint32_t node = 1;
  switch (depth % 5) {  // the top group takes the remainder, every other group five levels
    case 1: leaf = descend_levels<1>(tree.sum, node, mass, lane); break;
    case 2: leaf = descend_levels<2>(tree.sum, node, mass, lane); break;
    case 3: leaf = descend_levels<3>(tree.sum, node, mass, lane); break;
    case 4: leaf = descend_levels<4>(tree.sum, node, mass, lane); break;
    default: break;
  }
  if (depth % 5 != 0) clock.mark();
  for (int group = 0; group < depth / 5; ++group) {
    leaf = descend_levels<5>(tree.sum, node, mass, lane);
    clock.mark();
  }
  return node - tree.leaves;
}

// kCopyRows false: a draw ahead (no rows; the fused draw's code is unchanged by it).
template <bool kCopyRows>
__global__ void __launch_bounds__(kThreadsPerBlock)
    sample_proportional(std::uint32_t* out_indices, std::uint32_t* out_generations,
                        float* out_weights, SampledRowsView rows, ReplayStorageView storage,
                        ReplayTreeView tree,
                        const std::uint32_t* generations_now, ReplayCounters* counters,
                        const double* uniforms, std::uint64_t seed, std::uint32_t batch,
                        ReplayParams params, TransitionRowsView pending_rows,
                        std::uint32_t pending_count, std::uint64_t* phase_times) {
  PhaseClock clock{phase_times};  // block 0's thread 0: draw 0's lane 0
  clock.mark();
  allow_next_kernel_to_start();
  wait_for_prior_kernel();  // launched after the insert or the gradient step (launch_after_prior)
  clock.mark();
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const std::uint32_t warp = threadIdx.x / 32;
  // Lane 0 reads the step; the shuffle consumes the value, so the read is complete before this
  // warp's barrier arrive (which also releases it).
  std::uint64_t step = 0;
  std::uint32_t cursor = 0;
  if (lane == 0) {
    step = counters->step;
    if (pending_count > 0) cursor = counters->cursor;
  }
  step = __shfl_sync(kFullMask, step, 0);
  cursor = __shfl_sync(kFullMask, cursor, 0);
  const std::uint32_t capacity = tree.capacity;
  const PendingSlots pending_slots = PendingSlots::after_insert(cursor, pending_count, capacity);
  if (warp == kWarpsPerBlock) {  // the step warp
    write_rows_by_group(storage, capacity, pending_slots.first, pending_rows, pending_count,
                        blockIdx.x, gridDim.x, static_cast<std::uint32_t>(lane), 32);
    // Waits until the block's draw warps have read the step (bar.arrive releases their reads),
    // then counts the block in; the block counted last advances the step.
    asm volatile("bar.sync %0, %1;" ::"n"(kStepReadBarrier), "n"(kThreadsPerBlock) : "memory");
    if (lane == 0) {
      __threadfence();
      const unsigned blocks_before = atomicAdd(&counters->sample_blocks_done, 1u);
      if (blocks_before == gridDim.x - 1) {
        __threadfence();
        counters->sample_blocks_done = 0;
        counters->step = step + 1;
      }
    }
    return;
  }
  asm volatile("bar.arrive %0, %1;" ::"n"(kStepReadBarrier), "n"(kThreadsPerBlock) : "memory");
  const std::uint32_t k = blockIdx.x * kWarpsPerBlock + warp;
  if (k < batch) {  // whole warps: k is uniform across the warp
    const double total = tree.sum[1];
    const double min_positive_total = tree.min_positive[1];
    double u = 0.0;
    if (lane == 0) u = draw_uniform(uniforms, seed, step, k);
    u = __shfl_sync(kFullMask, u, 0);
    const double mass = draw_mass(params, k, batch, u, total);
    const double min_probability = min_positive_total / total;
    const double beta = beta_at_step(params, step);
    clock.mark();
    double leaf = total;
    const std::uint32_t slot = find_prefix_sum(tree, mass, lane, leaf, clock);
    // Lane 0's generation load goes out with the row's, the weight's pow runs while they are in
    // flight (ptxas places its two divisions before the loads), and every store follows every
    // load (gather_row.cuh).
    std::uint32_t generation = 0;
    if (lane == 0) generation = generations_now[slot];
    // A pending slot's row is not in the storage yet: it comes from pending_rows.
    std::uint32_t pending_row = 0;
    const bool pending = pending_slots.holds(slot, pending_row);
    float weight = 0.0f;
    const auto weigh = [&] {
      if (lane == 0) weight = is_weight(leaf / total, min_probability, beta);
    };
    if constexpr (kCopyRows) {
      copy_row_by_warp(rows, pending ? pending_rows : stored_rows(storage), storage.state_dim, k,
                       pending ? pending_row : slot, lane, weigh);
    } else {
      weigh();  // a draw ahead: the rows follow in launch_gather_rows
    }
    clock.mark();
    if (lane == 0)
      write_draw(out_indices, out_generations, out_weights, k, slot, generation, weight);
    clock.mark();
  }
  clock.mark();
}

}  // namespace

void launch_sample_proportional(std::uint32_t* out_indices, std::uint32_t* out_generations,
                                float* out_weights, SampledRowsView rows,
                                ReplayStorageView storage, ReplayTreeView tree,
                                const std::uint32_t* generations_now, ReplayCounters* counters,
                                const double* uniforms, std::uint64_t seed, std::uint32_t batch,
                                ReplayParams params, TransitionRowsView pending_rows,
                                std::uint32_t pending_count, cudaStream_t stream,
                                std::uint64_t* phase_times) {
  const NvtxRange range("replay/sample_proportional");
  const unsigned blocks = (batch + kWarpsPerBlock - 1) / kWarpsPerBlock;
  launch_after_prior({dim3(blocks), dim3(kThreadsPerBlock)}, stream,
                     rows.states != nullptr ? sample_proportional<true>
                                            : sample_proportional<false>,
                     out_indices, out_generations, out_weights, rows, storage, tree,
                     generations_now, counters, uniforms, seed, batch, params, pending_rows,
                     pending_count, phase_times);
  RESIDENT_CHECK_LAUNCH("sample_proportional");
}

}  // namespace resident::kernels
