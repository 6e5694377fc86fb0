// The training draw of the diffusion forecaster, fused with q_sample and the time sinusoid
// (kernels/models/diffusion/diffusion_draw.cu). Per row b < batch, from the Philox stream keyed by
// (key.seed, subsequence b, offset = *step * draw_stride(O)), *step read on the device (the slab's
// AdamW step counter: a graph replay draws afresh, an eager run and a replay of the same step draw
// the same):
//   draw 0:          t_b = floor(d0 T / 2^32)                      (uniform on [0, T))
//   draws 1 + 2o, 2 + 2o:  eps[b, o] = normal_from_bits(...)        (o < O)
//   x_t[b, o]  = sqrt_alpha_bar[t_b] y[b, o] + sqrt_one_minus_alpha_bar[t_b] eps[b, o]
//   sinusoid[b, c] = time_sinusoid(t_b, c, time_dim)
// Overwrites t [batch], eps [batch, O], x_t [batch, O], sinusoid [batch, time_dim]. One block of
// threads per row; deterministic.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/core/philox.h"

namespace resident::kernels::diffusion {

// 32-bit draws per row per step: 1 + 2 O rounded up to whole Philox blocks of four.
constexpr std::uint64_t draw_stride(std::size_t outputs) { return (1 + 2 * outputs + 3) / 4 * 4; }

void launch_diffusion_draw(int* t, float* eps, float* x_t, float* sinusoid, const float* y,
                           const float* sqrt_alpha_bar, const float* sqrt_one_minus_alpha_bar,
                           PhiloxKey key, const std::uint64_t* step, std::size_t batch,
                           std::size_t outputs, std::size_t steps, std::size_t time_dim,
                           cudaStream_t stream);

}  // namespace resident::kernels::diffusion
