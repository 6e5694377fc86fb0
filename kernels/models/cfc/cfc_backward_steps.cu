#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/cfc/cfc_backward_steps.h"
#include "kernels/models/cfc/cfc_cell.cuh"

namespace resident::kernels::cfc {

namespace {

constexpr int R = kCfcRowsPerBlock;

__global__ void __launch_bounds__(kCfcStepThreads)
    cfc_backward_steps(CfcBackwardOutputs out, const float* __restrict__ z,
                       const float* __restrict__ cell, const float* __restrict__ xt,
                       CfcBackwardWeights w, CfcStepShape s, int t_begin, int t_end) {
  extern __shared__ float smem[];
  const int H = s.hidden, U = s.units, G = s.heads() * s.hidden, B = s.batch;
  const int C = s.cell_width();
  float* dh_s = smem;          // [R][H]
  float* dp_s = dh_s + R * H;  // [R][U]
  float* dg_s = dp_s + R * U;  // [R][G]
  const int row0 = blockIdx.x * R;
  const int rows = min(R, B - row0);
  const int tid = threadIdx.x;

  for (int e = tid; e < R * H; e += blockDim.x) {
    const int r = e / H, i = e % H;
    dh_s[e] = r < rows ? out.dh[static_cast<std::size_t>(row0 + r) * H + i] : 0.0f;
  }
  __syncthreads();
  for (int t = t_end - 1; t >= t_begin; --t) {
    const std::size_t step = static_cast<std::size_t>(t) * B;
    // The cell's backward: dg (and pure mode's dA, dw_tau terms).
    for (int e = tid; e < R * H; e += blockDim.x) {
      const int r = e / H, i = e % H;
      float* dg = dg_s + r * G;
      if (r >= rows) {
        for (int c = 0; c < G / H; ++c) dg[c * H + i] = 0.0f;
        continue;
      }
      const std::size_t row = step + row0 + r;
      const float ts = s.time_column < 0
                           ? 1.0f
                           : xt[row * static_cast<std::size_t>(s.features) + s.time_column];
      const float* saved = cell + row * C;
      const float dh = dh_s[e];
      float* dg_out = out.dg + row * G;
      if (s.pure) {
        const float f = saved[i], a = w.A[i], wt = w.w_tau[i];
        const float ex = expf(-ts * (fabsf(wt) + fabsf(f)));
        const float sign_w = wt > 0.0f ? 1.0f : (wt < 0.0f ? -1.0f : 0.0f);
        dg[i] = dh * (-a * ex * (1.0f - ts * fabsf(f)));
        out.qa[row * H + i] = dh * (1.0f - ex * f);
        out.qw[row * H + i] = dh * a * f * ex * ts * sign_w;
      } else {
        const float f1 = saved[i], f2 = saved[H + i], sg = saved[2 * H + i];
        const float ds = dh * (f2 - f1) * sg * (1.0f - sg);
        dg[i] = dh * (1.0f - sg) * (1.0f - f1 * f1);
        dg[H + i] = dh * sg * (1.0f - f2 * f2);
        dg[2 * H + i] = ds * ts;
        dg[3 * H + i] = ds;
      }
      for (int c = 0; c < G / H; ++c) dg_out[c * H + i] = dg[c * H + i];
    }
    __syncthreads();
    // dz = dg Wheads, dp = dz lecun'(z).
    for (int k = tid; k < U; k += blockDim.x) {
      float acc[R];
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] = 0.0f;
      for (int j = 0; j < G; ++j) {
        const float wk = w.heads_weight[static_cast<std::size_t>(j) * U + k];
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] += dg_s[r * G + j] * wk;
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float dp = 0.0f;
        if (r < rows) {
          const std::size_t at = (step + row0 + r) * U + k;
          dp = acc[r] * lecun_derivative_from_output(z[at]);
          out.dp[at] = dp;
        }
        dp_s[r * U + k] = dp;
      }
    }
    __syncthreads();
    // dh_{t-1} = dp Wh.
    for (int i = tid; i < H; i += blockDim.x) {
      float acc[R];
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] = 0.0f;
      for (int k = 0; k < U; ++k) {
        const float wi = w.recurrent_weight[static_cast<std::size_t>(k) * H + i];
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] += dp_s[r * U + k] * wi;
      }
#pragma unroll
      for (int r = 0; r < R; ++r) dh_s[r * H + i] = acc[r];
    }
    __syncthreads();
  }
  for (int e = tid; e < rows * H; e += blockDim.x)
    out.dh[static_cast<std::size_t>(row0) * H + e] = dh_s[e];
}

}  // namespace

void launch_cfc_backward_steps(const CfcBackwardOutputs& out, const float* z, const float* cell,
                               const float* xt, const CfcBackwardWeights& weights,
                               const CfcStepShape& shape, int t_begin, int t_end,
                               cudaStream_t stream) {
  const NvtxRange range("cfc/backward_steps");
  if (t_begin < 0 || t_end < t_begin || t_end > shape.window)
    throw Error("launch_cfc_backward_steps", "invalid argument",
                "steps [" + std::to_string(t_begin) + ", " + std::to_string(t_end) +
                    "), allowed 0 <= t_begin <= t_end <= window = " +
                    std::to_string(shape.window),
                __FILE__, __LINE__);
  const std::size_t shared =
      cfc_step_shared_bytes(static_cast<std::size_t>(shape.hidden),
                            static_cast<std::size_t>(shape.units),
                            static_cast<std::size_t>(shape.heads()));
  if (shared > kCfcMaxStepSharedBytes)
    throw Error("launch_cfc_backward_steps", "invalid argument",
                "hidden = " + std::to_string(shape.hidden) + ", units = " +
                    std::to_string(shape.units) + " need " + std::to_string(shared) +
                    " bytes of shared memory, allowed <= " +
                    std::to_string(kCfcMaxStepSharedBytes),
                __FILE__, __LINE__);
  if (shape.batch <= 0 || t_begin == t_end) return;
  const unsigned blocks = static_cast<unsigned>((shape.batch + R - 1) / R);
  cfc_backward_steps<<<blocks, kCfcStepThreads, shared, stream>>>(out, z, cell, xt, weights,
                                                                  shape, t_begin, t_end);
  RESIDENT_CHECK_LAUNCH("cfc_backward_steps");
}

}  // namespace resident::kernels::cfc
