#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/cfc/cfc_transpose.h"

namespace resident::kernels::cfc {

namespace {

constexpr unsigned kThreads = 256;

// One grid-stride thread per output element out[c * rows + r] (writes coalesced; the weights
// are small and read once per forward).
__global__ void __launch_bounds__(kThreads)
    cfc_transpose(float* __restrict__ out, const float* __restrict__ w, std::size_t rows,
                  std::size_t cols) {
  const std::size_t total = rows * cols;
  for (std::size_t e = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; e < total;
       e += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t r = e % rows, c = e / rows;
    out[e] = w[r * cols + c];
  }
}

}  // namespace

void launch_cfc_transpose(float* out, const float* w, std::size_t rows, std::size_t cols,
                          cudaStream_t stream) {
  const NvtxRange range("cfc/transpose");
  const std::size_t total = rows * cols;
  if (total == 0) return;
  cfc_transpose<<<grid_stride_blocks(total, kThreads), kThreads, 0, stream>>>(out, w, rows, cols);
  RESIDENT_CHECK_LAUNCH("cfc_transpose");
}

}  // namespace resident::kernels::cfc
