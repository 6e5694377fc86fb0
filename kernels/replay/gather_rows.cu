// Gather of drawn rows: the rank draw's, and the proportional draw ahead's (launched without
// rows, sample_proportional.cu). One warp per draw (copy_row_by_warp) and, per block, one more
// warp that writes the rows of the split insert still pending, row j of block b's writer warp for
// j = b, b + grid, ... (write_rows_by_group), to slot (cursor - pending_count + j) % capacity; a
// draw of one of those slots copies its row from pending_rows instead. Nothing in the kernel
// reads a slot's row that it writes, so with the draw ahead the outputs equal the fused draw's
// after the split insert, bit for bit. Overwrites `rows` [batch] and the pending slots' rows.
#include <algorithm>

#include "kernels/core/programmatic_launch.cuh"
#include "kernels/replay/gather_row.cuh"
#include "kernels/replay/pending_slots.cuh"
#include "kernels/replay/replay_kernels.h"
#include "kernels/replay/write_rows.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr unsigned kWarpsPerBlock = 8;  // copy warps; and the writer warp

__global__ void __launch_bounds__((kWarpsPerBlock + 1) * 32)
    gather_rows(SampledRowsView rows, ReplayStorageView storage, const std::uint32_t* indices,
                std::uint32_t batch, const ReplayCounters* counters, std::uint32_t capacity,
                TransitionRowsView pending_rows, std::uint32_t pending_count) {
  allow_next_kernel_to_start();
  wait_for_prior_kernel();  // launched after the draw or its join (launch_after_prior)
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const std::uint32_t warp = threadIdx.x / 32;
  const PendingSlots pending_slots = PendingSlots::after_insert(
      pending_count > 0 ? counters->cursor : 0u, pending_count, capacity);
  if (warp == kWarpsPerBlock) {
    write_rows_by_group(storage, capacity, pending_slots.first, pending_rows, pending_count,
                        blockIdx.x, gridDim.x, static_cast<std::uint32_t>(lane), 32);
    return;
  }
  const std::uint32_t k = blockIdx.x * kWarpsPerBlock + warp;
  if (k >= batch) return;
  const std::uint32_t slot = indices[k];
  std::uint32_t pending_row = 0;
  const bool pending = pending_slots.holds(slot, pending_row);
  copy_row_by_warp(rows, pending ? pending_rows : stored_rows(storage), storage.state_dim, k,
                   pending ? pending_row : slot, lane, [] {});
}

}  // namespace

void launch_gather_rows(SampledRowsView rows, ReplayStorageView storage,
                        const std::uint32_t* indices, std::uint32_t batch,
                        const ReplayCounters* counters, std::uint32_t capacity,
                        TransitionRowsView pending_rows, std::uint32_t pending_count,
                        cudaStream_t stream) {
  const NvtxRange range("replay/gather_rows");
  if (batch == 0 && pending_count == 0) return;
  const unsigned blocks = std::max(1u, (batch + kWarpsPerBlock - 1) / kWarpsPerBlock);
  launch_after_prior({dim3(blocks), dim3((kWarpsPerBlock + 1) * 32)}, stream, gather_rows, rows,
                     storage, indices, batch, counters, capacity, pending_rows, pending_count);
  RESIDENT_CHECK_LAUNCH("gather_rows");
}

}  // namespace resident::kernels
