// Element functions of the causal depthwise conv (contract in causal_conv1d.h), shared by the
// kernels and by host emulations in the tests.
#pragma once

#include <cuda_runtime.h>

#include "kernels/core/unroll.h"

namespace resident::kernels::causal_conv {

struct View {
  const float* u;
  long long u_stride;
  const float* weight;
  const float* bias;
  int length;
  int kernel;
  bool silu;
};

__host__ __device__ inline float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

// pre-activation at (sequence b, time t, channel c)
__host__ __device__ inline float pre(const View& v, long long b, int t, int c) {
  float acc = v.bias != nullptr ? v.bias[c] : 0.0f;
  for (int k = 0; k < v.kernel; ++k) {
    const int src = t - v.kernel + 1 + k;
    if (src >= 0) acc += v.weight[c * v.kernel + k] * v.u[(b * v.length + src) * v.u_stride + c];
  }
  return acc;
}

__host__ __device__ inline float forward(const View& v, long long b, int t, int c) {
  const float p = pre(v, b, t, c);
  return v.silu ? p * sigmoid(p) : p;
}

// dLoss/dpre at (b, t, c) from dy there.
__host__ __device__ inline float dpre(const View& v, long long b, int t, int c, float dy) {
  if (!v.silu) return dy;
  const float p = pre(v, b, t, c);
  const float s = sigmoid(p);
  return dy * s * (1.0f + p * (1.0f - s));
}

// du at (b, s, c): sum_{j < K, s + j < L} weight[c, K-1-j] dpre(b, s + j, c).
__host__ __device__ inline float du(const View& v, const float* dy, long long dy_stride,
                                    long long b, int s, int c) {
  float acc = 0.0f;
  for (int j = 0; j < v.kernel && s + j < v.length; ++j) {
    const int t = s + j;
    const float g = dpre(v, b, t, c, dy[(b * v.length + t) * dy_stride + c]);
    acc += v.weight[c * v.kernel + v.kernel - 1 - j] * g;
  }
  return acc;
}

}  // namespace resident::kernels::causal_conv

// ----- Register-window thread programs (the kernels' bodies; host-callable, so a CPU test runs
// the very code the GPU runs). One thread owns channel c and kRunRows consecutive rows
// [base, base + kRunRows) of the flattened [batch * length] rows (a run may cross sequence
// boundaries; `t0` is the time step of row `base`). The thread loads each u and dy it needs once
// into registers (its run plus a halo of kMaxTaps - 1 rows on each side where the math needs
// it); every register index is a compile-time constant (taps are counted backwards from the
// output, m = K - 1 - k, with weights beyond K zero), so nothing spills to local memory.
namespace resident::kernels::causal_conv {

inline constexpr int kMaxTaps = 8;   // == kCausalConvMaxKernel
inline constexpr int kRunRows = 16;  // rows per thread

// wsh[m] = weight[c, K - 1 - m] for m < K, else 0.
__host__ __device__ inline void shifted_weights(const View& v, int c, float (&wsh)[kMaxTaps]) {
RESIDENT_UNROLL
  for (int m = 0; m < kMaxTaps; ++m) wsh[m] = m < v.kernel ? v.weight[c * v.kernel + v.kernel - 1 - m] : 0.0f;
}

// y for the run's rows (rows >= `rows` are skipped).
__host__ __device__ inline void forward_run(float* y, long long y_stride, const View& v,
                                            long long rows, long long base, int t0, int c) {
  constexpr int H = kMaxTaps - 1;
  float wsh[kMaxTaps];
  shifted_weights(v, c, wsh);
  const float bias = v.bias != nullptr ? v.bias[c] : 0.0f;
  float uu[kRunRows + H];  // uu[j]: u at row base - H + j (0 outside [0, rows))
RESIDENT_UNROLL
  for (int j = 0; j < kRunRows + H; ++j) {
    const long long row = base - H + j;
    uu[j] = (j >= H - (v.kernel - 1) && row >= 0 && row < rows) ? v.u[row * v.u_stride + c] : 0.0f;
  }
  int t = t0;
RESIDENT_UNROLL
  for (int o = 0; o < kRunRows; ++o) {
    if (base + o < rows) {
      float p = bias;
RESIDENT_UNROLL
      for (int m = 0; m < kMaxTaps; ++m)
        if (t >= m) p += wsh[m] * uu[o + H - m];
      y[(base + o) * y_stride + c] = v.silu ? p * sigmoid(p) : p;
    }
    t = t + 1 == v.length ? 0 : t + 1;
  }
}

// du for the run's rows (when du is non-null) and the run's parameter sums: sums[m] =
// sum over the run's rows of dpre(row) u(row - m) (the same sequence only; m < K), sums[kMaxTaps]
// = sum of dpre over the run (dbias).
__host__ __device__ inline void backward_run(float* du, long long du_stride, const float* dy,
                                             long long dy_stride, const View& v, long long rows,
                                             long long base, int t0, int c,
                                             float (&sums)[kMaxTaps + 1]) {
  constexpr int H = kMaxTaps - 1;
  constexpr int kDp = kRunRows + H;      // dpre at rows base .. base + kRunRows + H - 1
  constexpr int kU = kRunRows + 2 * H;   // u at rows base - H .. base + kRunRows + H - 1
  float wsh[kMaxTaps];
  shifted_weights(v, c, wsh);
  const float bias = v.bias != nullptr ? v.bias[c] : 0.0f;
  const int K = v.kernel;
  float uu[kU];
RESIDENT_UNROLL
  for (int j = 0; j < kU; ++j) {
    const long long row = base - H + j;
    const bool needed = j >= H - (K - 1) && j < kRunRows + H + (K - 1);
    uu[j] = (needed && row >= 0 && row < rows) ? v.u[row * v.u_stride + c] : 0.0f;
  }
  float dp[kDp];
  int tt[kDp];  // time step of each dp row
  int t = t0;
RESIDENT_UNROLL
  for (int o = 0; o < kDp; ++o) {
    tt[o] = t;
    const long long row = base + o;
    float g = 0.0f;
    if (row < rows && (o < kRunRows || o < kRunRows + K - 1)) {
      const float d = dy[row * dy_stride + c];
      if (v.silu) {
        float p = bias;
RESIDENT_UNROLL
        for (int m = 0; m < kMaxTaps; ++m)
          if (t >= m) p += wsh[m] * uu[o + H - m];
        const float s = sigmoid(p);
        g = d * s * (1.0f + p * (1.0f - s));
      } else {
        g = d;
      }
    }
    dp[o] = g;
    t = t + 1 == v.length ? 0 : t + 1;
  }
RESIDENT_UNROLL
  for (int m = 0; m <= kMaxTaps; ++m) sums[m] = 0.0f;
RESIDENT_UNROLL
  for (int o = 0; o < kRunRows; ++o) {
    if (base + o >= rows) break;
    const int ts = tt[o];
    if (du != nullptr) {
      float acc = 0.0f;
RESIDENT_UNROLL
      for (int j = 0; j < kMaxTaps; ++j)
        if (ts + j < v.length) acc += wsh[j] * dp[o + j];
      du[(base + o) * du_stride + c] = acc;
    }
RESIDENT_UNROLL
    for (int m = 0; m < kMaxTaps; ++m)
      if (m < K && ts >= m) sums[m] += dp[o] * uu[o + H - m];
    sums[kMaxTaps] += dp[o];
  }
}

}  // namespace resident::kernels::causal_conv
