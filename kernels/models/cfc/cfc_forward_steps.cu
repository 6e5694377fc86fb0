#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/cfc/cfc_cell.cuh"
#include "kernels/models/cfc/cfc_forward_steps.h"

namespace resident::kernels::cfc {

namespace {

constexpr int R = kCfcRowsPerBlock;

__global__ void __launch_bounds__(kCfcStepThreads)
    cfc_forward_steps(float* __restrict__ z, float* __restrict__ cell, float* __restrict__ hs,
                      const float* __restrict__ p_in, const float* __restrict__ xt,
                      CfcForwardWeights w, CfcStepShape s, int t_begin, int t_end) {
  extern __shared__ float smem[];
  const int H = s.hidden, U = s.units, G = s.heads() * s.hidden, B = s.batch;
  const int C = s.cell_width();
  float* h_s = smem;          // [R][H]: h_{t-1}
  float* z_s = h_s + R * H;   // [R][U]
  float* g_s = z_s + R * U;   // [R][G]
  const int row0 = blockIdx.x * R;
  const int rows = min(R, B - row0);
  const int tid = threadIdx.x;

  for (int t = t_begin; t < t_end; ++t) {
    const std::size_t step = static_cast<std::size_t>(t) * B;
    for (int e = tid; e < R * H; e += blockDim.x) {
      const int r = e / H, i = e % H;
      float v = 0.0f;
      if (r < rows) {
        const std::size_t at = (step + row0 + r) * H + i;
        if (t == 0)
          hs[at] = 0.0f;
        else
          v = hs[at];
      }
      h_s[e] = v;
    }
    __syncthreads();
    // Backbone: p = p_in + h_{t-1} Wh^T + b, z = lecun(p).
    for (int k = tid; k < U; k += blockDim.x) {
      float acc[R];
      const float bias = w.backbone_bias[k];
#pragma unroll
      for (int r = 0; r < R; ++r)
        acc[r] = r < rows ? p_in[(step + row0 + r) * U + k] + bias : 0.0f;
      for (int j = 0; j < H; ++j) {
        const float wk = w.recurrent_t[static_cast<std::size_t>(j) * U + k];
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] += h_s[r * H + j] * wk;
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float zv = lecun_tanh(acc[r]);
        z_s[r * U + k] = zv;
        if (r < rows) z[(step + row0 + r) * U + k] = zv;
      }
    }
    __syncthreads();
    // Heads: g = z Wheads^T + b_heads.
    for (int j = tid; j < G; j += blockDim.x) {
      float acc[R];
      const float bias = w.heads_bias[j];
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] = bias;
      for (int k = 0; k < U; ++k) {
        const float wj = w.heads_t[static_cast<std::size_t>(k) * G + j];
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] += z_s[r * U + k] * wj;
      }
#pragma unroll
      for (int r = 0; r < R; ++r) g_s[r * G + j] = acc[r];
    }
    __syncthreads();
    // The cell.
    for (int e = tid; e < rows * H; e += blockDim.x) {
      const int r = e / H, i = e % H;
      const std::size_t row = step + row0 + r;
      const float ts = s.time_column < 0
                           ? 1.0f
                           : xt[row * static_cast<std::size_t>(s.features) + s.time_column];
      const float* g = g_s + r * G;
      float* saved = cell + row * C;
      float h;
      if (s.pure) {
        const float f = g[i], a = w.A[i];
        const float ex = expf(-ts * (fabsf(w.w_tau[i]) + fabsf(f)));
        h = -a * ex * f + a;
        saved[i] = f;
      } else {
        const float f1 = tanhf(g[i]), f2 = tanhf(g[H + i]);
        const float sg = cfc_sigmoid(g[2 * H + i] * ts + g[3 * H + i]);
        h = f1 * (1.0f - sg) + sg * f2;
        saved[i] = f1;
        saved[H + i] = f2;
        saved[2 * H + i] = sg;
      }
      hs[(step + B + row0 + r) * H + i] = h;
    }
    __syncthreads();  // the next step reads hs[t + 1] written by other threads of this block
  }
}

}  // namespace

void launch_cfc_forward_steps(float* z, float* cell, float* hs, const float* p_in,
                              const float* xt, const CfcForwardWeights& weights,
                              const CfcStepShape& shape, int t_begin, int t_end,
                              cudaStream_t stream) {
  const NvtxRange range("cfc/forward_steps");
  if (t_begin < 0 || t_end < t_begin || t_end > shape.window)
    throw Error("launch_cfc_forward_steps", "invalid argument",
                "steps [" + std::to_string(t_begin) + ", " + std::to_string(t_end) +
                    "), allowed 0 <= t_begin <= t_end <= window = " +
                    std::to_string(shape.window),
                __FILE__, __LINE__);
  const std::size_t shared =
      cfc_step_shared_bytes(static_cast<std::size_t>(shape.hidden),
                            static_cast<std::size_t>(shape.units),
                            static_cast<std::size_t>(shape.heads()));
  if (shared > kCfcMaxStepSharedBytes)
    throw Error("launch_cfc_forward_steps", "invalid argument",
                "hidden = " + std::to_string(shape.hidden) + ", units = " +
                    std::to_string(shape.units) + " need " + std::to_string(shared) +
                    " bytes of shared memory, allowed <= " +
                    std::to_string(kCfcMaxStepSharedBytes),
                __FILE__, __LINE__);
  if (shape.batch <= 0 || t_begin == t_end) return;
  const unsigned blocks = static_cast<unsigned>((shape.batch + R - 1) / R);
  cfc_forward_steps<<<blocks, kCfcStepThreads, shared, stream>>>(z, cell, hs, p_in, xt, weights,
                                                                 shape, t_begin, t_end);
  RESIDENT_CHECK_LAUNCH("cfc_forward_steps");
}

}  // namespace resident::kernels::cfc
