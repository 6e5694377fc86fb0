// Block program of the SSD forward (contract in ssd.h): block `index` = b * H + h walks the
// chunks in order, carrying the head's state [P, N] in shared memory.
#pragma once

#include "kernels/models/mamba2/block_program.cuh"
#include "kernels/models/mamba2/ssd.h"
#include "kernels/models/mamba2/ssd_tile.cuh"

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
    // M_ij = exp(seg(i, j)) (C_i . B_j) dt_j over the lower triangle, one 4 x 4 tile per job.
    const int nt = tiles_for(len);
    block.phase([&](unsigned tid) {
      for (int k = static_cast<int>(tid); k < nt * (nt + 1) / 2; k += T) {
        int ti = 0, tj = 0;
        lower_triangle_tile(k, ti, tj);
        int ri[kTile], rj[kTile];
        tile_rows(ti, len, ri);
        tile_rows(tj, len, rj);
        float cb[kTile][kTile];
        tile_zero(cb);
        tile_row_dots(cb, Cs, sN, ri, Bs, sN, rj, N);
        for (int x = 0; x < kTile; ++x)
          for (int y = 0; y < kTile; ++y) {
            const int i = ti * kTile + x, j = tj * kTile + y;
            if (i < len && j <= i) M[i * sQ + j] *= cb[x][y] * dts[j];
          }
      }
    });
    // y[i][p] = sum_{j<=i} M_ij x_j[p] + exp(cs_i) (h_in C_i)[p] + D x_i[p], tiles of (i, p).
    block.phase([&](unsigned tid) {
      const int tp = tiles_for(P);
      for (int k = static_cast<int>(tid); k < nt * tp; k += T) {
        const int ti = k / tp, tq = k % tp;
        int ri[kTile], rp[kTile];
        tile_rows(ti, len, ri);
        tile_rows(tq, P, rp);
        float acc[kTile][kTile], hc[kTile][kTile];
        tile_zero(acc);
        tile_zero(hc);
        const int j_end = ti * kTile + kTile < len ? ti * kTile + kTile : len;
        for (int j = 0; j < j_end; ++j) {
          float mv[kTile], xv[kTile];
          RESIDENT_UNROLL
          for (int x = 0; x < kTile; ++x) {
            mv[x] = j <= ti * kTile + x ? M[ri[x] * sQ + j] : 0.0f;
            xv[x] = Xs[j * sP + rp[x]];
          }
          tile_outer_add(acc, mv, xv);
        }
        if (c > 0) tile_row_dots(hc, Cs, sN, ri, hs, sN, rp, N);
        for (int x = 0; x < kTile; ++x)
          for (int y = 0; y < kTile; ++y) {
            const int i = ti * kTile + x, p = tq * kTile + y;
            if (i >= len || p >= P) continue;
            const float v = c > 0 ? acc[x][y] + ecs[i] * hc[x][y] : acc[x][y];
            a.y[(row0 + i) * di + h * P + p] = v + Dh * Xs[i * sP + p];
          }
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
