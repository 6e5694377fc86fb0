// BiN, the bilinear input normalization of TLOB (kernels/models/tlob/bin_norm.cu; the formula is
// tests/reference/tlob_reference.h's step 1), forward and the backward of its parameters.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/core/grad_mode.h"

namespace resident::kernels::tlob {

struct BinParams {
  const float* l1 = nullptr;  // [L]
  const float* b1 = nullptr;  // [L]
  const float* l2 = nullptr;  // [F]
  const float* b2 = nullptr;  // [F]
  const float* y1 = nullptr;  // [1]
  const float* y2 = nullptr;  // [1]
};

struct BinGrads {
  float* l1 = nullptr;
  float* b1 = nullptr;
  float* l2 = nullptr;
  float* b2 = nullptr;
  float* y1 = nullptr;
  float* y2 = nullptr;
};

// Floats of `partials` scratch the backward needs: batch * (2 L + 2 F + 2).
std::size_t bin_partials_floats(std::size_t batch, std::size_t window, std::size_t features);

// x [batch, L, F] -> xb [batch, L, F] (overwritten); z1, z2 [batch, L, F] (overwritten): the
// feature and temporal z-scores the backward reads. One block per sample; fp32 two-pass mean and
// unbiased variance in a fixed order; a std below 1e-4 counts as 1. Deterministic; capturable.
// Throws resident::Error for batch == 0, L < 2 or F < 2, or L or F above 4096.
void launch_bin_forward(float* xb, float* z1, float* z2, const float* x, const BinParams& params,
                        std::size_t batch, std::size_t window, std::size_t features,
                        cudaStream_t stream);

// From dxb [batch, L, F] and the forward's z1, z2: the gradients of l1, b1, l2, b2, y1, y2, ADDED
// (mode Accumulate) or written (Overwrite) into `grads`. Per-sample partials in `partials`
// (bin_partials_floats), then each parameter summed over the samples in sample order: no atomics,
// deterministic. The input gradient is not formed. Capturable.
void launch_bin_backward(const BinGrads& grads, float* partials, const float* dxb, const float* z1,
                         const float* z2, const BinParams& params, std::size_t batch,
                         std::size_t window, std::size_t features, nn::GradMode mode,
                         cudaStream_t stream);

}  // namespace resident::kernels::tlob
