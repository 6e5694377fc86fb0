#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/diffusion/diffusion_block_activation.h"
#include "kernels/nn/activation_math.cuh"

namespace resident::kernels::diffusion {

namespace {

constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    diffusion_block_activation(float* __restrict__ z, float* __restrict__ a,
                               const float* __restrict__ bias, const float* __restrict__ temb,
                               std::size_t temb_row_stride, std::size_t rows, std::size_t width) {
  const std::size_t total = rows * width;
  for (std::size_t e = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; e < total;
       e += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t r = e / width, c = e % width;
    const float v = z[e] + bias[c] + temb[r * temb_row_stride + c];
    z[e] = v;
    a[e] = activation_math::silu(v);
  }
}

}  // namespace

void launch_diffusion_block_activation(float* z, float* a, const float* bias, const float* temb,
                                       std::size_t temb_row_stride, std::size_t rows,
                                       std::size_t width, cudaStream_t stream) {
  const NvtxRange range("diffusion/block_activation");
  const std::size_t total = rows * width;
  if (total == 0) return;
  diffusion_block_activation<<<grid_stride_blocks(total, kThreads), kThreads, 0, stream>>>(
      z, a, bias, temb, temb_row_stride, rows, width);
  RESIDENT_CHECK_LAUNCH("diffusion_block_activation");
}

}  // namespace resident::kernels::diffusion
