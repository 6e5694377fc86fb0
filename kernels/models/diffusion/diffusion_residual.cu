#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/diffusion/diffusion_residual.h"

namespace resident::kernels::diffusion {

namespace {

constexpr unsigned kThreads = 256;

// No __restrict__: out may alias h or y (each element is read before it is written, by the same
// thread).
__global__ void __launch_bounds__(kThreads)
    diffusion_residual(float* out, const float* h, const float* y, const float* bias,
                       std::size_t rows, std::size_t width) {
  const std::size_t total = rows * width;
  for (std::size_t e = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; e < total;
       e += std::size_t{gridDim.x} * blockDim.x)
    out[e] = h[e] + y[e] + bias[e % width];
}

}  // namespace

void launch_diffusion_residual(float* out, const float* h, const float* y, const float* bias,
                               std::size_t rows, std::size_t width, cudaStream_t stream) {
  const NvtxRange range("diffusion/residual");
  const std::size_t total = rows * width;
  if (total == 0) return;
  diffusion_residual<<<grid_stride_blocks(total, kThreads), kThreads, 0, stream>>>(out, h, y, bias,
                                                                                   rows, width);
  RESIDENT_CHECK_LAUNCH("diffusion_residual");
}

}  // namespace resident::kernels::diffusion
