// The variable selection network's combine step (kernels/models/tft/tft_vsn_combine.cu). The
// per-variable GRNs end in a LayerNorm whose affine part is per variable; the GRN kernels stop
// at the normalized xhat [N, F, H] and the combine applies gamma_j, beta_j [F, H] and the
// selection weights v [N, F]:
//   forward   xi[n, k] = sum_j v[n, j] (gamma[j, k] xhat[n, j, k] + beta[j, k])     [N, H]
//   backward  with w[n, j, k] = v[n, j] dxi[n, k]:
//             dv[n, j]       = sum_k dxi[n, k] (gamma[j, k] xhat[n, j, k] + beta[j, k])  [N, F]
//             dxhat[n, j, k] = gamma[j, k] w[n, j, k]                                 [N, F, H]
//             dbeta_terms    = w,  dgamma_terms = w xhat                              [N, F, H]
//   (the column sums of the two term buffers over n are dbeta, dgamma: kernels/nn/bias.h).
// All outputs overwritten; sums over j and k run in a fixed order (one warp per (n, j), a fixed
// shuffle tree): deterministic, no atomics. H <= 64. Outputs must not alias inputs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::tft {

void launch_vsn_combine_forward(float* xi, const float* v, const float* xhat, const float* gamma,
                                const float* beta, std::size_t rows, std::size_t features,
                                std::size_t hidden, cudaStream_t stream);

struct VsnCombineGrads {
  float* dv = nullptr;            // [N, F]
  float* dxhat = nullptr;         // [N, F, H]
  float* dbeta_terms = nullptr;   // [N, F, H]
  float* dgamma_terms = nullptr;  // [N, F, H]
};

void launch_vsn_combine_backward(const VsnCombineGrads& grads, const float* dxi, const float* v,
                                 const float* xhat, const float* gamma, const float* beta,
                                 std::size_t rows, std::size_t features, std::size_t hidden,
                                 cudaStream_t stream);

}  // namespace resident::kernels::tft
