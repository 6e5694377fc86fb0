#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/diffusion/diffusion_concat.h"

namespace resident::kernels::diffusion {

namespace {

constexpr unsigned kThreads = 256;

// One grid-stride thread per element of u (writes coalesced).
__global__ void __launch_bounds__(kThreads)
    diffusion_concat(float* __restrict__ u, const float* __restrict__ x_t,
                     const float* __restrict__ cond, const float* __restrict__ temb,
                     std::size_t rows, std::size_t outputs, std::size_t width) {
  const std::size_t k_width = outputs + 2 * width, total = rows * k_width;
  for (std::size_t e = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; e < total;
       e += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t r = e / k_width, c = e % k_width;
    u[e] = c < outputs           ? x_t[r * outputs + c]
           : c < outputs + width ? cond[r * width + (c - outputs)]
                                 : temb[r * width + (c - outputs - width)];
  }
}

}  // namespace

void launch_diffusion_concat(float* u, const float* x_t, const float* cond, const float* temb,
                             std::size_t rows, std::size_t outputs, std::size_t width,
                             cudaStream_t stream) {
  const NvtxRange range("diffusion/concat");
  const std::size_t total = rows * (outputs + 2 * width);
  if (total == 0) return;
  diffusion_concat<<<grid_stride_blocks(total, kThreads), kThreads, 0, stream>>>(
      u, x_t, cond, temb, rows, outputs, width);
  RESIDENT_CHECK_LAUNCH("diffusion_concat");
}

}  // namespace resident::kernels::diffusion
