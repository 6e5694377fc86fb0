// TFT's one-query interpretable attention, backward (contract in tft_attention.h).
#include <cmath>

#include "kernels/core/nvtx_range.h"
#include "kernels/models/tft/tft_attention_common.cuh"

namespace resident::kernels::tft {

namespace {

// Shared memory: the reduction scratch [blockDim] and ds [L] of the current head.
__global__ void attention_backward(float* dq, float* dkeys, float* dvalues, const float* dmixed,
                                   const float* q, const float* keys, const float* values,
                                   const float* probs, const float* abar, AttentionShape s,
                                   float scale) {
  extern __shared__ float shared[];
  float* scratch = shared;
  float* ds = scratch + blockDim.x;
  const std::size_t b = blockIdx.x;
  const unsigned t = threadIdx.x;
  const std::size_t L = s.steps, H = s.hidden, nh = s.heads, dk = H / nh, dv = dk;
  float dabar = 0.0f;  // of step t, divided by nh
  if (t < L) {
    const float* dm = dmixed + b * dv;
    const float* vt = values + (b * L + t) * dv;
    float* dvt = dvalues + (b * L + t) * dv;
    const float a = abar[b * L + t];
    for (std::size_t k = 0; k < dv; ++k) {
      dabar = fmaf(dm[k], vt[k], dabar);
      dvt[k] = a * dm[k];
    }
    dabar /= static_cast<float>(nh);
  }
  for (std::size_t h = 0; h < nh; ++h) {
    const float p = t < L ? probs[(b * nh + h) * L + t] : 0.0f;
    const float dot = detail::block_reduce<false>(p * dabar, scratch);
    const float d = p * (dabar - dot) * scale;  // exactly 0 at masked steps (p = 0)
    if (t < L) {
      ds[t] = d;
      const float* qh = q + b * H + h * dk;
      float* dkt = dkeys + (b * L + t) * H + h * dk;
      for (std::size_t k = 0; k < dk; ++k) dkt[k] = d * qh[k];
    }
    __syncthreads();
    if (t < dk) {
      float sum = 0.0f;
      for (std::size_t u = 0; u < L; ++u)
        sum = fmaf(ds[u], keys[(b * L + u) * H + h * dk + t], sum);
      dq[b * H + h * dk + t] = sum;
    }
    __syncthreads();
  }
}

}  // namespace

void launch_attention_backward(float* dq, float* dkeys, float* dvalues, const float* dmixed,
                               const float* q, const float* keys, const float* values,
                               const float* probs, const float* abar,
                               const AttentionShape& shape, cudaStream_t stream) {
  detail::check_attention("launch_attention_backward", shape);
  const NvtxRange range("tft/attention_backward");
  const unsigned threads = detail::attention_threads(shape);
  const float scale =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.hidden / shape.heads)));
  attention_backward<<<static_cast<unsigned>(shape.batch), threads,
                       (threads + shape.steps) * sizeof(float), stream>>>(
      dq, dkeys, dvalues, dmixed, q, keys, values, probs, abar, shape, scale);
  RESIDENT_CHECK_LAUNCH("attention_backward");
}

}  // namespace resident::kernels::tft
