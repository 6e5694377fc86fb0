// The ancestral sampler's noise and update (kernels/models/diffusion/diffusion_sampler_step.cu).
// Noise element (r, o) of draw block j comes from the Philox stream keyed by (key.seed,
// subsequence r, offset j * sampler_noise_stride(O) + 2o): two 32-bit draws a, b and
// normal_from_bits(a, b) (diffusion_random.cuh). Block 0 is x_T; the step at timestep t > 0 uses
// block T - t.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/core/philox.h"

namespace resident::kernels::diffusion {

// 32-bit draws per row per block: 2 O rounded up to whole Philox blocks of four.
constexpr std::uint64_t sampler_noise_stride(std::size_t outputs) {
  return (2 * outputs + 3) / 4 * 4;
}

// The schedule's float coefficients at one timestep (lib/models/diffusion/diffusion_schedule.h).
struct SamplerStepCoefficients {
  float sqrt_recip_alpha_bar = 0.0f;
  float sqrt_recip_alpha_bar_minus_one = 0.0f;
  float c1 = 0.0f, c2 = 0.0f, sigma = 0.0f;
  bool add_noise = false;         // t > 0
  std::uint64_t noise_block = 0;  // T - t
};

// x [rows, O] = the noise of block 0 (x_T). Overwrites x; deterministic.
void launch_diffusion_sampler_noise(float* x, PhiloxKey key, std::size_t rows, std::size_t outputs,
                                    cudaStream_t stream);

// In place on x [rows, O], with eps_hat = eps_raw + output_bias (eps_raw [rows, O] the output
// GEMM's product, output_bias [O]):
//   x0_hat = sqrt_recip_alpha_bar x - sqrt_recip_alpha_bar_minus_one eps_hat
//   x      = c1 x0_hat + c2 x + (add_noise ? sigma z : 0),  z the noise of block noise_block.
// Elementwise, deterministic.
void launch_diffusion_sampler_step(float* x, const float* eps_raw, const float* output_bias,
                                   const SamplerStepCoefficients& c, PhiloxKey key,
                                   std::size_t rows, std::size_t outputs, cudaStream_t stream);

}  // namespace resident::kernels::diffusion
