// TFT's one-query interpretable attention, forward (contract in tft_attention.h).
#include <cmath>

#include "kernels/core/nvtx_range.h"
#include "kernels/models/tft/tft_attention_common.cuh"

namespace resident::kernels::tft {

namespace {

// Shared memory: the reduction scratch [blockDim] and abar [L].
__global__ void attention_forward(float* probs, float* abar_out, float* mixed, const float* q,
                                  const float* keys, const float* values, AttentionShape s,
                                  float scale) {
  extern __shared__ float shared[];
  float* scratch = shared;
  float* abar = scratch + blockDim.x;
  const std::size_t b = blockIdx.x;
  const unsigned t = threadIdx.x;
  const std::size_t L = s.steps, H = s.hidden, nh = s.heads, dk = H / nh;
  const bool visible = t < L && t <= s.query_step;
  float mean = 0.0f;
  for (std::size_t h = 0; h < nh; ++h) {
    float score = -INFINITY;
    if (visible) {
      const float* qh = q + b * H + h * dk;
      const float* kt = keys + (b * L + t) * H + h * dk;
      float dot = 0.0f;
      for (std::size_t k = 0; k < dk; ++k) dot = fmaf(qh[k], kt[k], dot);
      score = dot * scale;
    }
    const float top = detail::block_reduce<true>(score, scratch);
    const float e = visible ? expf(score - top) : 0.0f;
    const float sum = detail::block_reduce<false>(e, scratch);
    const float p = e / sum;
    if (t < L) probs[(b * nh + h) * L + t] = p;
    mean += p;
  }
  if (t < L) {
    mean /= static_cast<float>(nh);
    abar[t] = mean;
    abar_out[b * L + t] = mean;
  }
  __syncthreads();
  const std::size_t dv = dk;
  if (t < dv) {
    float sum = 0.0f;
    for (std::size_t u = 0; u < L; ++u) sum = fmaf(abar[u], values[(b * L + u) * dv + t], sum);
    mixed[b * dv + t] = sum;
  }
}

}  // namespace

void launch_attention_forward(float* probs, float* abar, float* mixed, const float* q,
                              const float* keys, const float* values,
                              const AttentionShape& shape, cudaStream_t stream) {
  detail::check_attention("launch_attention_forward", shape);
  const NvtxRange range("tft/attention_forward");
  const unsigned threads = detail::attention_threads(shape);
  const float scale =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.hidden / shape.heads)));
  attention_forward<<<static_cast<unsigned>(shape.batch), threads,
                      (threads + shape.steps) * sizeof(float), stream>>>(probs, abar, mixed, q,
                                                                          keys, values, shape,
                                                                          scale);
  RESIDENT_CHECK_LAUNCH("attention_forward");
}

}  // namespace resident::kernels::tft
