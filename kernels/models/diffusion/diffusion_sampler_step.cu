#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/diffusion/diffusion_random.cuh"
#include "kernels/models/diffusion/diffusion_sampler_step.h"

namespace resident::kernels::diffusion {

namespace {

constexpr unsigned kThreads = 256;

__device__ inline float noise_at(PhiloxKey key, std::uint64_t block, std::size_t r, std::size_t o,
                                 std::size_t outputs) {
  const PhiloxKey k{key.seed, block * sampler_noise_stride(outputs) + 2 * o};
  curandStatePhilox4_32_10_t state = philox_state(k, r);
  const unsigned a = curand(&state);
  const unsigned b = curand(&state);
  return normal_from_bits(a, b);
}

__global__ void __launch_bounds__(kThreads)
    diffusion_sampler_noise(float* __restrict__ x, PhiloxKey key, std::size_t rows,
                            std::size_t outputs) {
  const std::size_t total = rows * outputs;
  for (std::size_t e = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; e < total;
       e += std::size_t{gridDim.x} * blockDim.x)
    x[e] = noise_at(key, 0, e / outputs, e % outputs, outputs);
}

__global__ void __launch_bounds__(kThreads)
    diffusion_sampler_step(float* __restrict__ x, const float* __restrict__ eps_raw,
                           const float* __restrict__ output_bias, SamplerStepCoefficients c,
                           PhiloxKey key, std::size_t rows, std::size_t outputs) {
  const std::size_t total = rows * outputs;
  for (std::size_t e = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; e < total;
       e += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t o = e % outputs;
    const float xt = x[e];
    const float eps_hat = eps_raw[e] + output_bias[o];
    const float x0 = c.sqrt_recip_alpha_bar * xt - c.sqrt_recip_alpha_bar_minus_one * eps_hat;
    float next = c.c1 * x0 + c.c2 * xt;
    if (c.add_noise) next += c.sigma * noise_at(key, c.noise_block, e / outputs, o, outputs);
    x[e] = next;
  }
}

}  // namespace

void launch_diffusion_sampler_noise(float* x, PhiloxKey key, std::size_t rows, std::size_t outputs,
                                    cudaStream_t stream) {
  const NvtxRange range("diffusion/sampler_noise");
  const std::size_t total = rows * outputs;
  if (total == 0) return;
  diffusion_sampler_noise<<<grid_stride_blocks(total, kThreads), kThreads, 0, stream>>>(
      x, key, rows, outputs);
  RESIDENT_CHECK_LAUNCH("diffusion_sampler_noise");
}

void launch_diffusion_sampler_step(float* x, const float* eps_raw, const float* output_bias,
                                   const SamplerStepCoefficients& c, PhiloxKey key,
                                   std::size_t rows, std::size_t outputs, cudaStream_t stream) {
  const NvtxRange range("diffusion/sampler_step");
  const std::size_t total = rows * outputs;
  if (total == 0) return;
  diffusion_sampler_step<<<grid_stride_blocks(total, kThreads), kThreads, 0, stream>>>(
      x, eps_raw, output_bias, c, key, rows, outputs);
  RESIDENT_CHECK_LAUNCH("diffusion_sampler_step");
}

}  // namespace resident::kernels::diffusion
