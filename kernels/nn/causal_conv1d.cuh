// Element functions of the causal depthwise conv (contract in causal_conv1d.h), shared by the
// kernels and by host emulations in the tests.
#pragma once

#include <cuda_runtime.h>

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
