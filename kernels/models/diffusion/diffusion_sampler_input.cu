#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/diffusion/diffusion_sampler_input.h"

namespace resident::kernels::diffusion {

namespace {

constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    diffusion_sampler_input(float* __restrict__ h, const float* __restrict__ x,
                            const float* __restrict__ w, const float* __restrict__ cond_proj,
                            const float* __restrict__ time_proj, const float* __restrict__ bias,
                            std::size_t rows, std::size_t samples, std::size_t outputs,
                            std::size_t width) {
  const std::size_t total = rows * width, k_width = outputs + 2 * width;
  for (std::size_t e = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; e < total;
       e += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t r = e / width, j = e % width;
    float sum = 0.0f;
    for (std::size_t o = 0; o < outputs; ++o) sum += x[r * outputs + o] * w[j * k_width + o];
    h[e] = sum + cond_proj[(r / samples) * width + j] + time_proj[j] + bias[j];
  }
}

}  // namespace

void launch_diffusion_sampler_input(float* h, const float* x, const float* input_weight,
                                    const float* cond_proj, const float* time_proj,
                                    const float* bias, std::size_t rows,
                                    std::size_t samples_per_window, std::size_t outputs,
                                    std::size_t width, cudaStream_t stream) {
  const NvtxRange range("diffusion/sampler_input");
  const std::size_t total = rows * width;
  if (total == 0) return;
  diffusion_sampler_input<<<grid_stride_blocks(total, kThreads), kThreads, 0, stream>>>(
      h, x, input_weight, cond_proj, time_proj, bias, rows, samples_per_window, outputs, width);
  RESIDENT_CHECK_LAUNCH("diffusion_sampler_input");
}

}  // namespace resident::kernels::diffusion
