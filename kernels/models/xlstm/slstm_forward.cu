#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/xlstm/mlstm_cell_math.cuh"
#include "kernels/models/xlstm/slstm_recurrence.h"

namespace resident::kernels::xlstm {

namespace {

// One block per (sample, head), 4 DHs threads: thread (g, j) forms raw_g of unit j, threads
// j < DHs then run the cell with (c, n, m) in registers.
__global__ void slstm_forward(float* __restrict__ raw, float* __restrict__ c_out,
                              float* __restrict__ n_out, float* __restrict__ m_out,
                              float* __restrict__ h_out, const float* __restrict__ wx,
                              const float* __restrict__ bias, const float* __restrict__ R,
                              SlstmShape s) {
  __shared__ float Rs[4 * kSlstmMaxHeadDim * kSlstmMaxHeadDim];
  __shared__ float hprev[kSlstmMaxHeadDim];
  __shared__ float gate[4 * kSlstmMaxHeadDim];
  const int L = s.window, NH = s.heads, DHs = s.head_dim, D = NH * DHs;
  const int sample = blockIdx.x / NH, head = blockIdx.x % NH;
  const long long row0 = static_cast<long long>(sample) * L;
  const int gi = threadIdx.x / DHs, j = threadIdx.x % DHs;  // gate and unit of this thread
  for (int e = threadIdx.x; e < 4 * DHs * DHs; e += blockDim.x) {
    const int g = e / (DHs * DHs), rest = e % (DHs * DHs);
    Rs[e] = R[(static_cast<long long>(g) * NH + head) * DHs * DHs + rest];
  }
  if (threadIdx.x < DHs) hprev[threadIdx.x] = 0.0f;
  const int column = gi * D + head * DHs + j;
  const float b = bias[column];
  float c = 0.0f, n = 0.0f, m = 0.0f;
  __syncthreads();
  for (int t = 0; t < L; ++t) {
    const long long row = row0 + t;
    float acc = wx[row * 4 * D + column] + b;
    const float* Rrow = Rs + (gi * DHs + j) * DHs;
    for (int k = 0; k < DHs; ++k) acc += Rrow[k] * hprev[k];
    raw[row * 4 * D + column] = acc;
    gate[threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x < DHs) {
      const float ig = gate[j], lf = log_sigmoid(gate[DHs + j]);
      const float zt = tanhf(gate[2 * DHs + j]);
      const float og = 1.0f / (1.0f + expf(-gate[3 * DHs + j]));
      if (t == 0) {
        m = ig;
        c = zt;
        n = 1.0f;
      } else {
        const float m_new = fmaxf(ig, lf + m);
        const float ip = expf(ig - m_new), fp = expf(lf + m - m_new);
        c = fp * c + ip * zt;
        n = fp * n + ip;
        m = m_new;
      }
      const float h = og * c / n;
      const long long at = row * D + head * DHs + j;
      c_out[at] = c;
      n_out[at] = n;
      m_out[at] = m;
      h_out[at] = h;
      hprev[j] = h;
    }
    __syncthreads();
  }
}

}  // namespace

void launch_slstm_forward(float* raw, float* c, float* n, float* m, float* h, const float* wx,
                          const float* bias, const float* R, const SlstmShape& shape,
                          cudaStream_t stream) {
  if (shape.batch < 1 || shape.window < 1 || shape.heads < 1 || shape.head_dim < 1 ||
      shape.head_dim > kSlstmMaxHeadDim)
    throw Error("launch_slstm_forward", "invalid argument",
                "batch = " + std::to_string(shape.batch) + ", window = " +
                    std::to_string(shape.window) + ", heads = " + std::to_string(shape.heads) +
                    " (each allowed >= 1), head_dim = " + std::to_string(shape.head_dim) +
                    " (allowed [1, " + std::to_string(kSlstmMaxHeadDim) + "])",
                __FILE__, __LINE__);
  const NvtxRange range("xlstm/slstm_forward");
  slstm_forward<<<static_cast<unsigned>(shape.batch * shape.heads),
                  static_cast<unsigned>(4 * shape.head_dim), 0, stream>>>(raw, c, n, m, h, wx,
                                                                          bias, R, shape);
  RESIDENT_CHECK_LAUNCH("slstm_forward");
}

}  // namespace resident::kernels::xlstm
