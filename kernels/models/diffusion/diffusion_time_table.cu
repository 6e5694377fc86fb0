#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/diffusion/diffusion_random.cuh"
#include "kernels/models/diffusion/diffusion_time_table.h"

namespace resident::kernels::diffusion {

namespace {

constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    diffusion_time_table(float* __restrict__ table, std::size_t total, int time_dim) {
  for (std::size_t e = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; e < total;
       e += std::size_t{gridDim.x} * blockDim.x)
    table[e] =
        time_sinusoid(static_cast<int>(e / time_dim), static_cast<int>(e % time_dim), time_dim);
}

}  // namespace

void launch_diffusion_time_table(float* table, std::size_t steps, std::size_t time_dim,
                                 cudaStream_t stream) {
  const NvtxRange range("diffusion/time_table");
  const std::size_t total = steps * time_dim;
  if (total == 0) return;
  diffusion_time_table<<<grid_stride_blocks(total, kThreads), kThreads, 0, stream>>>(
      table, total, static_cast<int>(time_dim));
  RESIDENT_CHECK_LAUNCH("diffusion_time_table");
}

}  // namespace resident::kernels::diffusion
