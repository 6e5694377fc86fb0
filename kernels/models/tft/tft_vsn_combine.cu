// The variable selection network's combine step (contract in tft_vsn_combine.h).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/tft/tft_vsn_combine.h"

namespace resident::kernels::tft {

namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kWarps = kThreads / 32;

// One thread per (n, k): the sum over j in order.
__global__ void __launch_bounds__(kThreads)
    combine_forward(float* xi, const float* v, const float* xhat, const float* gamma,
                    const float* beta, std::size_t rows, std::size_t features,
                    std::size_t hidden) {
  const std::size_t n_total = rows * hidden;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
       i < n_total; i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t n = i / hidden, k = i % hidden;
    float sum = 0.0f;
    for (std::size_t j = 0; j < features; ++j) {
      const std::size_t jk = j * hidden + k;
      sum = fmaf(v[n * features + j], fmaf(gamma[jk], xhat[(n * features + j) * hidden + k],
                                           beta[jk]),
                 sum);
    }
    xi[i] = sum;
  }
}

// One warp per (n, j); lanes over k (two values each at most).
__global__ void __launch_bounds__(kThreads)
    combine_backward(VsnCombineGrads g, const float* dxi, const float* v, const float* xhat,
                     const float* gamma, const float* beta, std::size_t rows,
                     std::size_t features, std::size_t hidden) {
  const unsigned lane = threadIdx.x % 32;
  const std::size_t pairs = rows * features;
  for (std::size_t p = blockIdx.x * static_cast<std::size_t>(kWarps) + threadIdx.x / 32;
       p < pairs; p += static_cast<std::size_t>(gridDim.x) * kWarps) {
    const std::size_t n = p / features, j = p % features;
    const float vj = v[p];
    float dot = 0.0f;
    for (std::size_t k = lane; k < hidden; k += 32) {
      const std::size_t at = p * hidden + k, jk = j * hidden + k;
      const float d = dxi[n * hidden + k], xh = xhat[at];
      dot = fmaf(d, fmaf(gamma[jk], xh, beta[jk]), dot);
      const float w = vj * d;
      g.dxhat[at] = gamma[jk] * w;
      g.dbeta_terms[at] = w;
      g.dgamma_terms[at] = w * xh;
    }
    for (unsigned offset = 16; offset > 0; offset /= 2)
      dot += __shfl_xor_sync(0xffffffffu, dot, offset);
    if (lane == 0) g.dv[p] = dot;
  }
}

void check(const char* call, std::size_t rows, std::size_t features, std::size_t hidden) {
  if (rows == 0 || features == 0 || hidden == 0 || hidden > 64)
    throw Error(call, "invalid argument",
                "rows = " + std::to_string(rows) + ", features = " + std::to_string(features) +
                    ", hidden = " + std::to_string(hidden) +
                    "; allowed rows, features >= 1, hidden in [1, 64]",
                __FILE__, __LINE__);
}

}  // namespace

void launch_vsn_combine_forward(float* xi, const float* v, const float* xhat, const float* gamma,
                                const float* beta, std::size_t rows, std::size_t features,
                                std::size_t hidden, cudaStream_t stream) {
  check("launch_vsn_combine_forward", rows, features, hidden);
  const NvtxRange range("tft/vsn_combine_forward");
  combine_forward<<<grid_stride_blocks(rows * hidden, kThreads), kThreads, 0, stream>>>(
      xi, v, xhat, gamma, beta, rows, features, hidden);
  RESIDENT_CHECK_LAUNCH("combine_forward");
}

void launch_vsn_combine_backward(const VsnCombineGrads& grads, const float* dxi, const float* v,
                                 const float* xhat, const float* gamma, const float* beta,
                                 std::size_t rows, std::size_t features, std::size_t hidden,
                                 cudaStream_t stream) {
  check("launch_vsn_combine_backward", rows, features, hidden);
  const NvtxRange range("tft/vsn_combine_backward");
  combine_backward<<<grid_stride_blocks(rows * features, kWarps), kThreads, 0, stream>>>(
      grads, dxi, v, xhat, gamma, beta, rows, features, hidden);
  RESIDENT_CHECK_LAUNCH("combine_backward");
}

}  // namespace resident::kernels::tft
