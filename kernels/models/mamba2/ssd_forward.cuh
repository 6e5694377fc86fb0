// Block program of the SSD forward (contract in ssd.h): block `index` = b * H + h walks the
// chunks in order, carrying the head's state [P, N] in shared memory.
#pragma once

#include "kernels/models/mamba2/block_program.cuh"
#include "kernels/models/mamba2/ssd.h"

namespace resident::kernels::mamba2 {

template <class Block>
RESIDENT_HD void ssd_forward_block(Block& block, const SsdForwardArgs& a, float* smem) {
  const SsdDims& d = a.dims;
  const int Q = d.chunk, P = d.headdim, N = d.d_state, H = d.heads, L = d.length;
  const int sN = N + 1, sP = P + 1, sQ = Q + 1;
  const int b = static_cast<int>(block.index) / H, h = static_cast<int>(block.index) % H;
  const int di = H * P;
  const int T = static_cast<int>(block.threads);
  const int chunks = ssd_chunks(d);
  const float A = -expf(a.A_log[h]);
  const float Dh = a.D[h];
  const float dt_bias = a.dt_bias[h];

  float* Bs = smem;              // [Q, sN]
  float* Cs = Bs + Q * sN;       // [Q, sN]
  float* Xs = Cs + Q * sN;       // [Q, sP]
  float* M = Xs + Q * sP;        // [Q, sQ]: exp(seg), then (C.B) exp(seg) dt (lower triangle)
  float* dts = M + Q * sQ;       // [Q]
  float* as = dts + Q;           // [Q]
  float* ecs = as + Q;           // [Q] exp(cs)
  float* lam_end = ecs + Q;      // [Q] exp(seg(end, s)) dt_s
  float* hs = lam_end + Q;       // [P, sN] state entering the chunk

  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < P * sN; i += T) hs[i] = 0.0f;
  });
  for (int c = 0; c < chunks; ++c) {
    const int t0 = c * Q;
    const int len = L - t0 < Q ? L - t0 : Q;
    const long long row0 = static_cast<long long>(b) * L + t0;
    block.phase([&](unsigned tid) {
      for (int i = static_cast<int>(tid); i < len * N; i += T) {
        const int r = i / N, n = i % N;
        const float* src = a.xbc + (row0 + r) * d.xbc_stride + di;
        Bs[r * sN + n] = src[n];
        Cs[r * sN + n] = src[N + n];
      }
      for (int i = static_cast<int>(tid); i < len * P; i += T) {
        const int r = i / P, p = i % P;
        Xs[r * sP + p] = a.xbc[(row0 + r) * d.xbc_stride + h * P + p];
      }
      for (int r = static_cast<int>(tid); r < len; r += T) {
        const float dt = softplus_f(a.dt_raw[(row0 + r) * d.dt_stride + h] + dt_bias);
        dts[r] = dt;
        as[r] = dt * A;
      }
    });
    // Segment sums down each column j: exp(seg(i, j)) for i >= j; thread 0 also the cumsum.
    block.phase([&](unsigned tid) {
      for (int j = static_cast<int>(tid); j < len; j += T) {
        float seg = 0.0f;
        M[j * sQ + j] = 1.0f;
        for (int i = j + 1; i < len; ++i) {
          seg += as[i];
          M[i * sQ + j] = expf(seg);
        }
        lam_end[j] = expf(seg) * dts[j];
      }
      if (tid == 0) {
        float run = 0.0f;
        for (int i = 0; i < len; ++i) {
          run += as[i];
          ecs[i] = expf(run);
        }
      }
    });
    block.phase([&](unsigned tid) {
      for (int idx = static_cast<int>(tid); idx < len * len; idx += T) {
        const int i = idx / len, j = idx % len;
        if (j > i) continue;
        float cb = 0.0f;
        for (int n = 0; n < N; ++n) cb += Cs[i * sN + n] * Bs[j * sN + n];
        M[i * sQ + j] *= cb * dts[j];
      }
    });
    block.phase([&](unsigned tid) {
      for (int idx = static_cast<int>(tid); idx < len * P; idx += T) {
        const int i = idx / P, p = idx % P;
        float acc = 0.0f;
        for (int j = 0; j <= i; ++j) acc += M[i * sQ + j] * Xs[j * sP + p];
        if (c > 0) {
          float hc = 0.0f;
          for (int n = 0; n < N; ++n) hc += hs[p * sN + n] * Cs[i * sN + n];
          acc += ecs[i] * hc;
        }
        a.y[(row0 + i) * di + h * P + p] = acc + Dh * Xs[i * sP + p];
      }
    });
    if (c + 1 < chunks) {
      block.phase([&](unsigned tid) {
        const float decay = ecs[len - 1];
        for (int idx = static_cast<int>(tid); idx < P * N; idx += T) {
          const int p = idx / N, n = idx % N;
          float acc = decay * hs[p * sN + n];
          for (int j = 0; j < len; ++j) acc += lam_end[j] * Xs[j * sP + p] * Bs[j * sN + n];
          hs[p * sN + n] = acc;
          a.states[((static_cast<long long>(b) * H + h) * (chunks - 1) + c) * P * N + idx] = acc;
        }
      });
    }
  }
}

}  // namespace resident::kernels::mamba2
