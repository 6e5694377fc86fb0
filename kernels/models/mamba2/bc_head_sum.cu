// Kernel and launcher of bc_head_sum (contract in bc_head_sum.h).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/mamba2/bc_head_sum.cuh"

namespace resident::kernels::mamba2 {

namespace {

__global__ void __launch_bounds__(kBcHeadSumThreads) bc_head_sum_kernel(BcHeadSumArgs args) {
  DeviceBlock block{blockIdx.x, blockDim.x};
  bc_head_sum_block(block, args);
}

}  // namespace

void launch_bc_head_sum(const BcHeadSumArgs& args, cudaStream_t stream) {
  if (args.rows < 1 || args.heads < 1 || args.width < 1 || args.stride < args.col0 + args.width)
    throw Error("launch_bc_head_sum", "invalid shape",
                "rows " + std::to_string(args.rows) + ", heads " + std::to_string(args.heads) +
                    ", width " + std::to_string(args.width) + ", stride " +
                    std::to_string(args.stride) + ", col0 " + std::to_string(args.col0),
                __FILE__, __LINE__);
  NvtxRange range("mamba2::bc_head_sum");
  bc_head_sum_kernel<<<bc_head_sum_blocks(args), kBcHeadSumThreads, 0, stream>>>(args);
  RESIDENT_CHECK_LAUNCH("bc_head_sum_kernel");
}

}  // namespace resident::kernels::mamba2
