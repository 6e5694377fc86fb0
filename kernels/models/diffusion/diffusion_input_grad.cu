#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/diffusion/diffusion_input_grad.h"

namespace resident::kernels::diffusion {

namespace {

constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    diffusion_input_grad(float* __restrict__ dcond, float* __restrict__ dtemb,
                         const float* __restrict__ du, const float* __restrict__ dz,
                         std::size_t block_stride, std::size_t blocks, std::size_t rows,
                         std::size_t outputs, std::size_t width) {
  const std::size_t total = rows * width, k_width = outputs + 2 * width;
  for (std::size_t e = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; e < total;
       e += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t r = e / width, c = e % width;
    dcond[e] = du[r * k_width + outputs + c];
    float sum = du[r * k_width + outputs + width + c];
    for (std::size_t k = 0; k < blocks; ++k) sum += dz[k * block_stride + e];
    dtemb[e] = sum;
  }
}

}  // namespace

void launch_diffusion_input_grad(float* dcond, float* dtemb, const float* du, const float* dz,
                                 std::size_t block_stride, std::size_t blocks, std::size_t rows,
                                 std::size_t outputs, std::size_t width, cudaStream_t stream) {
  const NvtxRange range("diffusion/input_grad");
  const std::size_t total = rows * width;
  if (total == 0) return;
  diffusion_input_grad<<<grid_stride_blocks(total, kThreads), kThreads, 0, stream>>>(
      dcond, dtemb, du, dz, block_stride, blocks, rows, outputs, width);
  RESIDENT_CHECK_LAUNCH("diffusion_input_grad");
}

}  // namespace resident::kernels::diffusion
