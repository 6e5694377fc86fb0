// Block program of the SSD backward (contract in ssd.h): block `index` = b * H + h walks the
// chunks in reverse, carrying dLoss/d(state leaving the chunk) dh [P, N] in shared memory.
//
// Per chunk (rows i, j of the chunk; Lam_ij = exp(seg(i, j)); M_ij = (C_i . B_j) Lam_ij;
// R_ij = dy_i . x_j; the state h_in entering the chunk from the forward's states):
//   dXd_j = sum_{i>=j} M_ij dy_i + Lam_end,j dh B_j           (Xd = dt x)
//   dx_j  = dt_j dXd_j + D dy_j
//   dS_ij = dt_j R_ij Lam_ij;  dC_i = sum_j dS_ij B_j + exp(cs_i) dy_i^T h_in
//                              dB_j = sum_i dS_ij C_i + Lam_end,j dt_j x_j^T dh
//   Graw_ij = M_ij R_ij (G_ij = dt_j Graw_ij is dLoss/dseg(i, j) for j < i)
//   ddt_j (direct) = sum_{i>=j} Graw_ij + Lam_end,j q_j,  q_j = x_j . (dh B_j)
//   dcs_i = sum_{j<i} G_ij - sum_{i'>i} G_i'i + E_i - W_i,
//           E_i = exp(cs_i) dy_i . (h_in C_i),  W_i = Lam_end,i dt_i q_i,
//   dcs_end += sum_i W_i + exp(cs_end) <dh, h_in>
//   da_r = sum_{i>=r} dcs_i;  ddt_r += A da_r;  dA += dt_r da_r
//   dh <- exp(cs_end) dh + sum_i exp(cs_i) dy_i C_i^T
// The G and dcs bookkeeping treats seg(i, j) as cs_i - cs_j (true of the values), while the
// values themselves are accumulated as segment sums.
#pragma once

#include "kernels/models/mamba2/block_program.cuh"
#include "kernels/models/mamba2/ssd.h"
#include "kernels/models/mamba2/ssd_tile.cuh"

namespace resident::kernels::mamba2 {

template <class Block>
RESIDENT_HD void ssd_backward_block(Block& block, const SsdBackwardArgs& a, float* smem) {
  const SsdDims& d = a.dims;
  const int Q = d.chunk, P = d.headdim, N = d.d_state, H = d.heads, L = d.length;
  const int sN = N + 1, sP = P + 1, sQ = Q + 1;
  const int b = static_cast<int>(block.index) / H, h = static_cast<int>(block.index) % H;
  const int di = H * P;
  const long long rows = static_cast<long long>(d.batch) * L;
  const int T = static_cast<int>(block.threads);
  const int chunks = ssd_chunks(d);
  const float A = -expf(a.A_log[h]);
  const float Dh = a.D[h];
  const float dt_bias = a.dt_bias[h];

  float* Bs = smem;              // [Q, sN]
  float* Cs = Bs + Q * sN;       // [Q, sN]
  float* T1 = Cs + Q * sN;       // [Q, sN]: B_j[n] (x_j^T dh)[n]
  float* T2 = T1 + Q * sN;       // [Q, sN]: C_i[n] (dy_i^T h_in)[n]
  float* Xs = T2 + Q * sN;       // [Q, sP]
  float* dYs = Xs + Q * sP;      // [Q, sP]
  float* A1 = dYs + Q * sP;      // [Q, sQ]: lower M_ij; upper [j][i] Lam_ij, then Graw_ij
  float* A2 = A1 + Q * sQ;       // [Q, sQ]: lower dS_ij
  float* hin = A2 + Q * sQ;      // [P, sN]
  float* dh = hin + P * sN;      // [P, sN]
  float* dts = dh + P * sN;      // [Q] each below
  float* as = dts + Q;
  float* ecs = as + Q;
  float* lam_end = ecs + Q;      // exp(seg(end, j))
  float* gdiag = lam_end + Q;    // Graw_jj
  float* dcs = gdiag + Q;
  float* wv = dcs + Q;
  float* ddtd = wv + Q;          // ddt (direct)
  float* da = ddtd + Q;
  float* contrib_a = da + Q;     // dt_r da_r
  float* contrib_b = contrib_a + Q;  // ddt_raw_r
  float* contrib_d = contrib_b + Q;  // x_r . dy_r
  float* red = contrib_d + Q;    // [32]
  float* acc = red + 32;         // [3]: dA, dD, ddt_bias running sums

  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < P * sN; i += T) dh[i] = 0.0f;
    if (tid == 0) acc[0] = acc[1] = acc[2] = 0.0f;
  });
  for (int c = chunks - 1; c >= 0; --c) {
    const int t0 = c * Q;
    const int len = L - t0 < Q ? L - t0 : Q;
    const int end = len - 1;
    const bool last = c == chunks - 1;
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
        dYs[r * sP + p] = a.dy[(row0 + r) * di + h * P + p];
      }
      for (int r = static_cast<int>(tid); r < len; r += T) {
        const float dt = softplus_f(a.dt_raw[(row0 + r) * d.dt_stride + h] + dt_bias);
        dts[r] = dt;
        as[r] = dt * A;
      }
      for (int i = static_cast<int>(tid); i < P * N; i += T) {
        const int p = i / N, n = i % N;
        hin[p * sN + n] =
            c > 0 ? a.states[((static_cast<long long>(b) * H + h) * (chunks - 1) + (c - 1)) * P * N +
                             i]
                  : 0.0f;
      }
    });
    // Lam_ij (i > j) into the upper slot A1[j][i]; thread 0 also the cumsum.
    block.phase([&](unsigned tid) {
      for (int j = static_cast<int>(tid); j < len; j += T) {
        float seg = 0.0f;
        for (int i = j + 1; i < len; ++i) {
          seg += as[i];
          A1[j * sQ + i] = expf(seg);
        }
        lam_end[j] = expf(seg);
      }
      if (tid == 0) {
        float run = 0.0f;
        for (int i = 0; i < len; ++i) {
          run += as[i];
          ecs[i] = expf(run);
        }
      }
    });
    // M, dS and Graw over the lower triangle, one 4 x 4 tile of (i, j) per job.
    const int nt = tiles_for(len);
    block.phase([&](unsigned tid) {
      for (int k = static_cast<int>(tid); k < nt * (nt + 1) / 2; k += T) {
        int ti = 0, tj = 0;
        lower_triangle_tile(k, ti, tj);
        int ri[kTile], rj[kTile];
        tile_rows(ti, len, ri);
        tile_rows(tj, len, rj);
        float cb[kTile][kTile], rr[kTile][kTile];
        tile_zero(cb);
        tile_zero(rr);
        tile_row_dots(cb, Cs, sN, ri, Bs, sN, rj, N);
        tile_row_dots(rr, dYs, sP, ri, Xs, sP, rj, P);
        for (int x = 0; x < kTile; ++x)
          for (int y = 0; y < kTile; ++y) {
            const int i = ti * kTile + x, j = tj * kTile + y;
            if (i >= len || j > i) continue;
            const float lam = j < i ? A1[j * sQ + i] : 1.0f;
            const float m = cb[x][y] * lam;
            const float r = rr[x][y];
            A1[i * sQ + j] = m;
            A2[i * sQ + j] = dts[j] * r * lam;
            if (j < i)
              A1[j * sQ + i] = m * r;
            else
              gdiag[i] = m * r;
          }
      }
    });
    block.phase([&](unsigned tid) {
      // Jobs: dx tiles (j, p), then dC tiles (i, n), then dB tiles (j, n).
      const int tp = tiles_for(P), tn = tiles_for(N);
      const int jobs_dx = nt * tp, jobs_dc = nt * tn;
      for (int k = static_cast<int>(tid); k < jobs_dx + 2 * jobs_dc; k += T) {
        float acc[kTile][kTile], side[kTile][kTile];
        tile_zero(acc);
        tile_zero(side);
        if (k < jobs_dx) {
          // dx[j][p] = dt_j (sum_{i>=j} M_ij dy_i[p] + Lam_end,j (dh B_j)[p]) + D dy_j[p]
          const int tj = k / tp, tq = k % tp;
          int rj[kTile], rp[kTile];
          tile_rows(tj, len, rj);
          tile_rows(tq, P, rp);
          for (int i = tj * kTile; i < len; ++i) {
            float m[kTile], yv[kTile];
            RESIDENT_UNROLL
            for (int y = 0; y < kTile; ++y) {
              m[y] = i >= tj * kTile + y ? A1[i * sQ + rj[y]] : 0.0f;
              yv[y] = dYs[i * sP + rp[y]];
            }
            tile_outer_add(acc, m, yv);
          }
          if (!last) tile_row_dots(side, Bs, sN, rj, dh, sN, rp, N);
          for (int x = 0; x < kTile; ++x)
            for (int y = 0; y < kTile; ++y) {
              const int j = tj * kTile + x, p = tq * kTile + y;
              if (j >= len || p >= P) continue;
              const float dxd = last ? acc[x][y] : acc[x][y] + lam_end[j] * side[x][y];
              a.dxbc[(row0 + j) * d.xbc_stride + h * P + p] = dts[j] * dxd + Dh * dYs[j * sP + p];
            }
        } else if (k < jobs_dx + jobs_dc) {
          // dC[i][n] = sum_{j<=i} dS_ij B_j[n] + exp(cs_i) (dy_i^T h_in)[n]
          const int ti = (k - jobs_dx) / tn, tq = (k - jobs_dx) % tn;
          int ri[kTile], rn[kTile];
          tile_rows(ti, len, ri);
          tile_rows(tq, N, rn);
          const int j_end = ti * kTile + kTile < len ? ti * kTile + kTile : len;
          for (int j = 0; j < j_end; ++j) {
            float sv[kTile], bv[kTile];
            RESIDENT_UNROLL
            for (int x = 0; x < kTile; ++x) {
              sv[x] = j <= ti * kTile + x ? A2[ri[x] * sQ + j] : 0.0f;
              bv[x] = Bs[j * sN + rn[x]];
            }
            tile_outer_add(acc, sv, bv);
          }
          if (c > 0) {  // side[x][y] = (dy_i^T h_in)[n] = sum_p dy_i[p] h_in[p][n]
            for (int pp = 0; pp < P; ++pp) {
              float yv[kTile], hv[kTile];
              RESIDENT_UNROLL
              for (int x = 0; x < kTile; ++x) {
                yv[x] = dYs[ri[x] * sP + pp];
                hv[x] = hin[pp * sN + rn[x]];
              }
              tile_outer_add(side, yv, hv);
            }
          }
          for (int x = 0; x < kTile; ++x)
            for (int y = 0; y < kTile; ++y) {
              const int i = ti * kTile + x, n = tq * kTile + y;
              if (i >= len || n >= N) continue;
              float g = acc[x][y];
              float t2 = 0.0f;
              if (c > 0) {
                g += ecs[i] * side[x][y];
                t2 = Cs[i * sN + n] * side[x][y];
              }
              T2[i * sN + n] = t2;
              a.dbc_heads[(static_cast<long long>(h) * rows + row0 + i) * 2 * N + N + n] = g;
            }
        } else {
          // dB[j][n] = sum_{i>=j} dS_ij C_i[n] + Lam_end,j dt_j (x_j^T dh)[n]
          const int tj = (k - jobs_dx - jobs_dc) / tn, tq = (k - jobs_dx - jobs_dc) % tn;
          int rj[kTile], rn[kTile];
          tile_rows(tj, len, rj);
          tile_rows(tq, N, rn);
          for (int i = tj * kTile; i < len; ++i) {
            float sv[kTile], cv[kTile];
            RESIDENT_UNROLL
            for (int x = 0; x < kTile; ++x) {
              sv[x] = i >= tj * kTile + x ? A2[i * sQ + rj[x]] : 0.0f;
              cv[x] = Cs[i * sN + rn[x]];
            }
            tile_outer_add(acc, sv, cv);
          }
          if (!last) {  // side[x][y] = (x_j^T dh)[n] = sum_p x_j[p] dh[p][n]
            for (int pp = 0; pp < P; ++pp) {
              float xv[kTile], hv[kTile];
              RESIDENT_UNROLL
              for (int x = 0; x < kTile; ++x) {
                xv[x] = Xs[rj[x] * sP + pp];
                hv[x] = dh[pp * sN + rn[x]];
              }
              tile_outer_add(side, xv, hv);
            }
          }
          for (int x = 0; x < kTile; ++x)
            for (int y = 0; y < kTile; ++y) {
              const int j = tj * kTile + x, n = tq * kTile + y;
              if (j >= len || n >= N) continue;
              float g = acc[x][y];
              float t1 = 0.0f;
              if (!last) {
                g += lam_end[j] * dts[j] * side[x][y];
                t1 = Bs[j * sN + n] * side[x][y];
              }
              T1[j * sN + n] = t1;
              a.dbc_heads[(static_cast<long long>(h) * rows + row0 + j) * 2 * N + n] = g;
            }
        }
      }
      // dD per row
      for (int r = static_cast<int>(tid); r < len; r += T) {
        float s = 0.0f;
        for (int p = 0; p < P; ++p) s += Xs[r * sP + p] * dYs[r * sP + p];
        contrib_d[r] = s;
      }
      // <dh, h_in> in 32 fixed slices
      for (int s = static_cast<int>(tid); s < 32; s += T) {
        float v = 0.0f;
        if (c > 0 && !last)
          for (int k = s; k < P * N; k += 32) v += dh[(k / N) * sN + k % N] * hin[(k / N) * sN + k % N];
        red[s] = v;
      }
    });
    block.phase([&](unsigned tid) {
      for (int r = static_cast<int>(tid); r < len; r += T) {
        float row_g = 0.0f;
        for (int j = 0; j < r; ++j) row_g += dts[j] * A1[j * sQ + r];
        float col_graw = 0.0f;
        for (int i = r + 1; i < len; ++i) col_graw += A1[r * sQ + i];
        float q = 0.0f, e = 0.0f;
        for (int n = 0; n < N; ++n) {
          q += T1[r * sN + n];
          e += T2[r * sN + n];
        }
        const float w = dts[r] * lam_end[r] * q;
        ddtd[r] = col_graw + gdiag[r] + lam_end[r] * q;
        wv[r] = w;
        dcs[r] = row_g - dts[r] * col_graw + ecs[r] * e - w;
      }
    });
    block.phase([&](unsigned tid) {
      if (tid != 0) return;
      float total = 0.0f;
      for (int r = 0; r < len; ++r) total += wv[r];
      float dot = 0.0f;
      for (int s = 0; s < 32; ++s) dot += red[s];
      dcs[end] += total + ecs[end] * dot;
      float run = 0.0f;
      for (int r = end; r >= 0; --r) {
        run += dcs[r];
        da[r] = run;
      }
    });
    block.phase([&](unsigned tid) {
      for (int r = static_cast<int>(tid); r < len; r += T) {
        const long long e = (row0 + r) * d.dt_stride + h;
        const float ddt = ddtd[r] + A * da[r];
        const float ddt_raw = ddt * softplus_grad_f(a.dt_raw[e] + dt_bias);
        a.ddt_raw[e] = ddt_raw;
        contrib_a[r] = dts[r] * da[r];
        contrib_b[r] = ddt_raw;
      }
      if (c > 0)
        for (int idx = static_cast<int>(tid); idx < P * N; idx += T) {
          const int p = idx / N, n = idx % N;
          float g = ecs[end] * dh[p * sN + n];
          for (int i = 0; i < len; ++i) g += ecs[i] * dYs[i * sP + p] * Cs[i * sN + n];
          dh[p * sN + n] = g;
        }
    });
    block.phase([&](unsigned tid) {
      if (tid != 0) return;
      for (int r = 0; r < len; ++r) {
        acc[0] += contrib_a[r];
        acc[1] += contrib_d[r];
        acc[2] += contrib_b[r];
      }
    });
  }
  block.phase([&](unsigned tid) {
    if (tid != 0) return;
    const long long bh = static_cast<long long>(b) * H + h;
    const long long plane = static_cast<long long>(d.batch) * H;
    a.partials[bh] = acc[0] * A;  // dA_log = dA * dA/dA_log = dA * A
    a.partials[plane + bh] = acc[1];
    a.partials[2 * plane + bh] = acc[2];
  });
}

}  // namespace resident::kernels::mamba2
