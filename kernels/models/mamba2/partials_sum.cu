// Kernel and launcher of partials_sum (contract in partials_sum.h).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/mamba2/partials_sum.cuh"

namespace resident::kernels::mamba2 {

namespace {

__global__ void __launch_bounds__(kPartialThreads) partials_sum_kernel(PartialsSumArgs args) {
  __shared__ float smem[kPartialThreads];
  DeviceBlock block{blockIdx.x, blockDim.x};
  partials_sum_block(block, args, smem);
}

}  // namespace

void launch_partials_sum(std::span<const PartialSegment> segments, cudaStream_t stream) {
  NvtxRange range("mamba2::partials_sum");
  for (std::size_t first = 0; first < segments.size(); first += kMaxPartialSegments) {
    PartialsSumArgs args;
    for (std::size_t i = first; i < segments.size() && args.count < kMaxPartialSegments; ++i) {
      const PartialSegment& seg = segments[i];
      if (seg.partials == nullptr || seg.dest == nullptr || seg.rows < 1 || seg.cols < 1)
        throw Error("launch_partials_sum", "invalid segment",
                    "segment " + std::to_string(i) + ": rows " + std::to_string(seg.rows) +
                        ", cols " + std::to_string(seg.cols) + " (both >= 1, pointers non-null)",
                    __FILE__, __LINE__);
      args.segments[args.count++] = seg;
    }
    const int blocks = partials_sum_plan(args);
    partials_sum_kernel<<<blocks, kPartialThreads, 0, stream>>>(args);
    RESIDENT_CHECK_LAUNCH("partials_sum_kernel");
  }
}

}  // namespace resident::kernels::mamba2
