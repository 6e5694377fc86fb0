#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/cfc/cfc_time_major.h"

namespace resident::kernels::cfc {

namespace {

constexpr unsigned kThreads = 256;

// One grid-stride thread per output element xt[(t * B + b) * F + f] (writes coalesced).
__global__ void __launch_bounds__(kThreads)
    cfc_time_major(float* __restrict__ xt, const float* __restrict__ x, std::size_t batch,
                   std::size_t window, std::size_t features) {
  const std::size_t total = batch * window * features;
  for (std::size_t e = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; e < total;
       e += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t f = e % features, row = e / features;
    const std::size_t b = row % batch, t = row / batch;
    xt[e] = x[(b * window + t) * features + f];
  }
}

}  // namespace

void launch_cfc_time_major(float* xt, const float* x, std::size_t batch, std::size_t window,
                           std::size_t features, cudaStream_t stream) {
  const NvtxRange range("cfc/time_major");
  const std::size_t total = batch * window * features;
  if (total == 0) return;
  cfc_time_major<<<grid_stride_blocks(total, kThreads), kThreads, 0, stream>>>(xt, x, batch,
                                                                                 window, features);
  RESIDENT_CHECK_LAUNCH("cfc_time_major");
}

}  // namespace resident::kernels::cfc
