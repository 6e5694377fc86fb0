// Dropout with a Philox keep-mask (kernels/nn/dropout.cu). fp32 values, uint8 mask (1 = kept).
//
// Random numbers: element i uses 32-bit draw number i % 4 of Philox subsequence i / 4 of `key`
// (kernels/core/philox.cuh: curand_init(key.seed, i / 4, key.offset)), i.e. on the CPU
// reference::curand_philox_draw(key.seed, i / 4, key.offset, i % 4). It is kept iff that draw
// is below dropout_keep_threshold(keep_probability). The same key gives the same mask on any
// launch configuration; take each launch's key with
// PhiloxStream::next(kDropoutDrawsPerSubsequence).
#pragma once

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/core/philox.h"
#include "kernels/core/grad_mode.h"

namespace resident::kernels {

// 32-bit draws each Philox subsequence of one forward launch consumes.
inline constexpr std::uint64_t kDropoutDrawsPerSubsequence = 4;

// round(keep_probability * 2^32): a 32-bit draw d keeps its element iff d < threshold, so the
// keep rate is threshold / 2^32 (within 2^-33 of keep_probability; 2^32 keeps every element).
inline std::uint64_t dropout_keep_threshold(float keep_probability) {
  const double scaled = static_cast<double>(keep_probability) * 4294967296.0;  // * 2^32
  return static_cast<std::uint64_t>(std::llround(scaled));
}

// y[i] = keep_mask[i] ? x[i] / keep_probability : 0 and keep_mask[i] in {0, 1}, for i < n
// (overwrites y and keep_mask). keep_probability in (0, 1] (else resident::Error); the scale is
// the fp32 value of 1 / keep_probability, so keep_probability 1 keeps everything and y == x
// bit for bit. y may alias x. Deterministic: a function of (x, n, keep_probability, key).
void launch_dropout_forward(float* y, std::uint8_t* keep_mask, const float* x, std::size_t n,
                            float keep_probability, PhiloxKey key, cudaStream_t stream);

// dx[i] = keep_mask[i] ? dy[i] / keep_probability : 0 (overwrite: dx never read) or dx[i] +=
// that (accumulate), for i < n, from the mask the forward wrote. dx may alias dy. Deterministic.
void launch_dropout_backward(float* dx, const std::uint8_t* keep_mask, const float* dy,
                             std::size_t n, float keep_probability, nn::GradMode mode,
                             cudaStream_t stream);

}  // namespace resident::kernels
