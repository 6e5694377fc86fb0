// Gather of sampled rows (the rank draw's; the proportional draw gathers in its own kernel):
// one warp per draw, copy_row_by_warp. Overwrites `rows`.
#include "kernels/replay/gather_row.cuh"
#include "kernels/replay/replay_kernels.h"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr unsigned kWarpsPerBlock = 8;

__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gather_rows(SampledRowsView rows, ReplayStorageView storage, const std::uint32_t* indices,
                std::uint32_t batch) {
  const std::uint32_t k = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  if (k < batch) copy_row_by_warp(rows, storage, k, indices[k], static_cast<int>(threadIdx.x & 31u));
}

}  // namespace

void launch_gather_rows(SampledRowsView rows, ReplayStorageView storage,
                        const std::uint32_t* indices, std::uint32_t batch, cudaStream_t stream) {
  const NvtxRange range("replay/gather_rows");
  if (batch == 0) return;
  gather_rows<<<(batch + kWarpsPerBlock - 1) / kWarpsPerBlock, kWarpsPerBlock * 32, 0, stream>>>(
      rows, storage, indices, batch);
  RESIDENT_CHECK_LAUNCH("gather_rows");
}

}  // namespace resident::kernels
