// Device helpers of the diffusion kernels' random draws and time embedding (the reference forms
// are tests/reference/diffusion_reference.h's diffusion_normal_from_bits,
// diffusion_timestep_from_bits and diffusion_time_sinusoid).
#pragma once

#include <curand_kernel.h>

#include "kernels/core/philox.cuh"

namespace resident::kernels::diffusion {

// A standard normal from two 32-bit draws (Box-Muller, cosine branch):
// sqrt(-2 ln u1) cos(2 pi u2), u1 = (a + 0.5) 2^-32 in (0, 1), u2 = b 2^-32 in [0, 1).
__device__ inline float normal_from_bits(unsigned a, unsigned b) {
  const float u1 = (static_cast<float>(a) + 0.5f) * 0x1p-32f;
  const float u2 = static_cast<float>(b) * 0x1p-32f;
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

// floor(a T / 2^32): a timestep in [0, T).
__device__ inline int timestep_from_bits(unsigned a, int steps) {
  return static_cast<int>((static_cast<unsigned long long>(a) * static_cast<unsigned>(steps)) >>
                          32);
}

// Sinusoid element c < time_dim at timestep t: sin(t w_k) for c = k < half, cos(t w_{c-half})
// after, w_k = exp(-k ln(1e4) / (half - 1)); the argument in double (|t w| up to T), rounded to
// float once.
__device__ inline float time_sinusoid(int t, int c, int time_dim) {
  const int half = time_dim / 2;
  const int k = c < half ? c : c - half;
  const double w = exp(-static_cast<double>(k) * log(1e4) / static_cast<double>(half - 1));
  const double arg = static_cast<double>(t) * w;
  return static_cast<float>(c < half ? sin(arg) : cos(arg));
}

}  // namespace resident::kernels::diffusion
