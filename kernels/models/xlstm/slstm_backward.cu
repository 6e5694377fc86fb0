#include <string>

#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/xlstm/mlstm_cell_math.cuh"
#include "kernels/models/xlstm/slstm_recurrence.h"

namespace resident::kernels::xlstm {

namespace {

constexpr unsigned kThreads = 256;

// One block per (sample, head), reverse time. Threads j < DHs own unit j's carries (dc, dn);
// every thread then adds its share of draw_t h_{t-1}^T into the head's dR sum in shared memory
// (each element by one thread, in step order), and threads k < DHs form dh_rec = R^T draw_t.
__global__ void __launch_bounds__(kThreads)
    slstm_backward(float* __restrict__ draw, float* __restrict__ r_partials,
                   const float* __restrict__ raw, const float* __restrict__ c_in,
                   const float* __restrict__ n_in, const float* __restrict__ m_in,
                   const float* __restrict__ h_in, const float* __restrict__ dh,
                   const float* __restrict__ R, SlstmShape s) {
  __shared__ float Rs[4 * kSlstmMaxHeadDim * kSlstmMaxHeadDim];
  __shared__ float dRs[4 * kSlstmMaxHeadDim * kSlstmMaxHeadDim];
  __shared__ float dgate[4 * kSlstmMaxHeadDim];
  __shared__ float hprev[kSlstmMaxHeadDim];
  __shared__ float dh_rec[kSlstmMaxHeadDim];
  const int L = s.window, NH = s.heads, DHs = s.head_dim, D = NH * DHs;
  const int sample = blockIdx.x / NH, head = blockIdx.x % NH;
  const long long row0 = static_cast<long long>(sample) * L;
  const int RW = 4 * DHs * DHs;
  for (int e = threadIdx.x; e < RW; e += blockDim.x) {
    const int g = e / (DHs * DHs), rest = e % (DHs * DHs);
    Rs[e] = R[(static_cast<long long>(g) * NH + head) * DHs * DHs + rest];
    dRs[e] = 0.0f;
  }
  if (threadIdx.x < DHs) dh_rec[threadIdx.x] = 0.0f;
  float dc = 0.0f, dn = 0.0f;
  __syncthreads();
  for (int t = L - 1; t >= 0; --t) {
    const long long row = row0 + t;
    if (threadIdx.x < DHs) {
      const int j = threadIdx.x, u = head * DHs + j;
      const long long at = row * D + u;
      const float* rr = raw + row * 4 * D;
      const float ig = rr[u], fr = rr[D + u], zt = tanhf(rr[2 * D + u]);
      const float og = 1.0f / (1.0f + expf(-rr[3 * D + u]));
      const float c = c_in[at], n = n_in[at], h = h_in[at], m = m_in[at];
      const float dht = dh[at] + dh_rec[j];
      const float dct = dc + dht * og / n;
      const float dnt = dn - dht * h / n;
      const float ip = expf(ig - m);
      float* dr = draw + row * 4 * D;
      const float d_o = dht * c / n * og * (1.0f - og);
      const float d_z = dct * ip * (1.0f - zt * zt);
      const float d_i = ip * (zt * dct + dnt);
      float d_f = 0.0f;
      if (t > 0) {
        const long long prev = at - D;
        const float fp = expf(log_sigmoid(fr) + m_in[prev] - m);
        d_f = fp * (dct * c_in[prev] + dnt * n_in[prev]) / (1.0f + expf(fr));  // 1 - sigmoid
        dc = fp * dct;
        dn = fp * dnt;
        hprev[j] = h_in[prev];
      } else {
        hprev[j] = 0.0f;
      }
      dr[u] = d_i;
      dr[D + u] = d_f;
      dr[2 * D + u] = d_z;
      dr[3 * D + u] = d_o;
      dgate[j] = d_i;
      dgate[DHs + j] = d_f;
      dgate[2 * DHs + j] = d_z;
      dgate[3 * DHs + j] = d_o;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < RW; e += blockDim.x) {
      const int gj = e / DHs, k = e % DHs;  // gj = g * DHs + j
      dRs[e] += dgate[gj] * hprev[k];
    }
    if (threadIdx.x < DHs) {
      const int k = threadIdx.x;
      float acc = 0.0f;
      for (int gj = 0; gj < 4 * DHs; ++gj) acc += Rs[gj * DHs + k] * dgate[gj];
      dh_rec[k] = acc;
    }
    __syncthreads();
  }
  float* out = r_partials + static_cast<long long>(sample) * 4 * D * DHs;
  for (int e = threadIdx.x; e < RW; e += blockDim.x) {
    const int g = e / (DHs * DHs), rest = e % (DHs * DHs);
    out[(static_cast<long long>(g) * NH + head) * DHs * DHs + rest] = dRs[e];
  }
}

// dR[e] (+)= sum over samples of r_partials[sample, e], samples in order.
__global__ void __launch_bounds__(kThreads)
    slstm_r_grad_sum(float* __restrict__ dR, const float* __restrict__ r_partials, int batch,
                     long long count, bool accumulate) {
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    float acc = 0.0f;
    for (int b = 0; b < batch; ++b) acc += r_partials[b * count + e];
    dR[e] = accumulate ? dR[e] + acc : acc;
  }
}

}  // namespace

std::size_t slstm_backward_partial_floats(const SlstmShape& shape) {
  return static_cast<std::size_t>(shape.batch) * 4 * static_cast<std::size_t>(shape.heads) *
         static_cast<std::size_t>(shape.head_dim) * static_cast<std::size_t>(shape.head_dim);
}

void launch_slstm_backward(float* draw, float* dR, float* r_partials, const float* raw,
                           const float* c, const float* n, const float* m, const float* h,
                           const float* dh, const float* R, const SlstmShape& shape,
                           nn::GradMode mode, cudaStream_t stream) {
  if (shape.batch < 1 || shape.window < 1 || shape.heads < 1 || shape.head_dim < 1 ||
      shape.head_dim > kSlstmMaxHeadDim)
    throw Error("launch_slstm_backward", "invalid argument",
                "batch = " + std::to_string(shape.batch) + ", window = " +
                    std::to_string(shape.window) + ", heads = " + std::to_string(shape.heads) +
                    " (each allowed >= 1), head_dim = " + std::to_string(shape.head_dim) +
                    " (allowed [1, " + std::to_string(kSlstmMaxHeadDim) + "])",
                __FILE__, __LINE__);
  const NvtxRange range("xlstm/slstm_backward");
  slstm_backward<<<static_cast<unsigned>(shape.batch * shape.heads), kThreads, 0, stream>>>(
      draw, r_partials, raw, c, n, m, h, dh, R, shape);
  RESIDENT_CHECK_LAUNCH("slstm_backward");
  const long long count = 4LL * shape.heads * shape.head_dim * shape.head_dim;
  slstm_r_grad_sum<<<grid_stride_blocks(static_cast<std::size_t>(count), kThreads), kThreads, 0,
                     stream>>>(dR, r_partials, shape.batch, count,
                               mode == nn::GradMode::Accumulate);
  RESIDENT_CHECK_LAUNCH("slstm_r_grad_sum");
}

}  // namespace resident::kernels::xlstm
