// Block programs of TFT's fused per-variable GRNs (contracts in tft_variable_grn.h; the executors
// DeviceBlock/HostBlock of kernels/models/mamba2/block_program.cuh, so the CPU test runs this very
// code on the host).
//
// Block `index` owns variable j = index % F and the rows of chunk index / F
// ([chunk * kVgrnChunkRows, +kVgrnChunkRows)), walked in sub-tiles of kVgrnRows rows; thread t
// carries row t of the sub-tile. Shared memory (floats, vgrn_*_shared_floats): variable j's
// weights, each matrix row padded to a multiple of 16 with zeros (VgrnLayout), then one column
// buffer per row vector, [length][kVgrnStride]: element k of row t's vector at k * kVgrnStride + t
// (a thread's reads are consecutive across a warp; whole-tile passes read 4 rows at once).
// Row products run as register tiles of kVgrnOutTile outputs with the weights read 4 at a time;
// every sum runs in a fixed order (the inner index ascending, fma from 0, then the bias).
#pragma once

#include <cmath>
#include <cstddef>

#include "kernels/core/shared_load.cuh"
#include "kernels/core/unroll.h"
#include "kernels/models/mamba2/block_program.cuh"
#include "kernels/models/tft/tft_variable_grn.h"

namespace resident::kernels::tft {

using mamba2::DeviceBlock;
using mamba2::HostBlock;

inline constexpr int kVgrnRows = 64;               // rows a sub-tile = threads a block
inline constexpr int kVgrnStride = kVgrnRows + 4;  // column buffers' stride (floats, 16 B rows)
inline constexpr int kVgrnSubtiles = 4;            // sub-tiles a block
inline constexpr int kVgrnChunkRows = kVgrnRows * kVgrnSubtiles;
inline constexpr int kVgrnOutTile = 16;            // outputs of a row product's register tile
inline constexpr int kVgrnPad = 16;                // shared weight rows padded to this many floats

RESIDENT_HD inline int vgrn_round_up(int v, int m) { return (v + m - 1) / m * m; }

// Offsets (floats) of one variable's weights in shared memory and of its parameters in a packed
// gradient vector (the slab's order: w1, b1, w2, b2, wg, bg, ws, bs).
struct VgrnLayout {
  int hidden, prescale;
  int ld_in, ld_h;  // shared row strides of W1, Ws [H][ld_in] and W2 [H][ld_h], Wg [2H][ld_h]
  int w1, b1, w2, b2, wg, bg, ws, bs, weights;  // shared offsets; weights = their total
  int p_w1, p_b1, p_w2, p_b2, p_wg, p_bg, p_ws, p_bs, params;  // packed; params = P
};

RESIDENT_HD inline VgrnLayout vgrn_layout(int hidden, int prescale) {
  VgrnLayout l{};
  const int H = hidden, dc = prescale;
  l.hidden = H;
  l.prescale = dc;
  l.ld_in = vgrn_round_up(dc, kVgrnPad);
  l.ld_h = vgrn_round_up(H, kVgrnPad);
  l.w1 = 0;
  l.w2 = l.w1 + H * l.ld_in;
  l.wg = l.w2 + H * l.ld_h;
  l.ws = l.wg + 2 * H * l.ld_h;
  l.b1 = l.ws + H * l.ld_in;
  l.b2 = l.b1 + vgrn_round_up(H, 4);
  l.bg = l.b2 + vgrn_round_up(H, 4);
  l.bs = l.bg + vgrn_round_up(2 * H, 4);
  l.weights = l.bs + vgrn_round_up(H, 4);
  l.p_w1 = 0;
  l.p_b1 = l.p_w1 + H * dc;
  l.p_w2 = l.p_b1 + H;
  l.p_b2 = l.p_w2 + H * H;
  l.p_wg = l.p_b2 + H;
  l.p_bg = l.p_wg + 2 * H * H;
  l.p_ws = l.p_bg + 2 * H;
  l.p_bs = l.p_ws + H * dc;
  l.params = l.p_bs + H;
  return l;
}

// Shared floats: the weights, then E, Z, ETA1 [H], A [2H] (forward) or E, DX, Z1, ETA1, A, R
// (backward) column buffers.
RESIDENT_HD inline int vgrn_forward_shared_floats(int hidden, int prescale) {
  return vgrn_layout(hidden, prescale).weights + (prescale + 4 * hidden) * kVgrnStride;
}
RESIDENT_HD inline int vgrn_backward_shared_floats(int hidden, int prescale) {
  return vgrn_layout(hidden, prescale).weights + (prescale + 6 * hidden) * kVgrnStride;
}

RESIDENT_HD inline long long vgrn_chunks(long long rows) {
  return (rows + kVgrnChunkRows - 1) / kVgrnChunkRows;
}

// The sizes both programs take: N rows of F variables, hidden H, prescale d_c, the LayerNorm eps.
struct VgrnSizes {
  long long rows;
  int features, hidden, prescale;
  float eps;
};

// The launchers' sizes (checked against the allowed ranges by then) as VgrnSizes.
inline VgrnSizes vgrn_sizes(std::size_t rows, std::size_t features, std::size_t hidden,
                            std::size_t prescale, float eps) {
  return {static_cast<long long>(rows), static_cast<int>(features), static_cast<int>(hidden),
          static_cast<int>(prescale), eps};
}

struct VgrnForwardArgs {
  float* xhat;     // [rows, F, H]
  const float* e;  // [rows, F, dc]
  VgrnWeights w;
  VgrnSizes size;
};

struct VgrnBackwardArgs {
  float* de;           // [rows, F, dc], accumulated
  float* partials;     // [chunks, F, P], overwritten
  const float* dxhat;  // [rows, F, H]
  const float* e;      // [rows, F, dc]
  VgrnWeights w;
  VgrnSizes size;
};

struct VgrnReduceArgs {
  VgrnGrads g;
  const float* partials;  // [chunks, F, P]
  long long chunks;
  int features, hidden, prescale;
};

// ----- scalar math (the formulas of kernels/nn/activation_math.cuh and the glu_add kernel)

RESIDENT_HD inline float vgrn_elu(float x) { return x > 0.0f ? x : expm1f(x); }
RESIDENT_HD inline float vgrn_elu_derivative(float x) { return x > 0.0f ? 1.0f : expf(x); }

// sigmoid(x) and 1 - sigmoid(x), each from one expf of -|x| (no overflow).
struct VgrnSigmoidPair {
  float value, complement;
};
RESIDENT_HD inline VgrnSigmoidPair vgrn_sigmoid_pair(float x) {
  const float e = expf(-fabsf(x));
  const float large = 1.0f / (1.0f + e);
  const float small = e * large;
  return x >= 0.0f ? VgrnSigmoidPair{large, small} : VgrnSigmoidPair{small, large};
}

struct VgrnIdentity {
  RESIDENT_HD float operator()(float v) const { return v; }
};
struct VgrnEluOf {
  RESIDENT_HD float operator()(float v) const { return vgrn_elu(v); }
};


// ----- one row's products (thread t, its vectors in column buffers)

// emit(k, sum_{i < in} W[k ld + i] f(x[i S + t])) for k < out. Tile rows past `out` read row
// out - 1 and are not emitted.
template <class In, class Emit>
RESIDENT_HD void vgrn_row_product(const float* w, int ld, int out, int in, const float* x, int t,
                                  In f, Emit emit) {
  for (int k0 = 0; k0 < out; k0 += kVgrnOutTile) {
    float acc[kVgrnOutTile];
    int row[kVgrnOutTile];
    RESIDENT_UNROLL
    for (int a = 0; a < kVgrnOutTile; ++a) {
      acc[a] = 0.0f;
      row[a] = (k0 + a < out ? k0 + a : out - 1) * ld;
    }
    int i = 0;
    for (; i + 4 <= in; i += 4) {
      float xv[4];
      RESIDENT_UNROLL
      for (int q = 0; q < 4; ++q) xv[q] = f(x[(i + q) * kVgrnStride + t]);
      RESIDENT_UNROLL
      for (int a = 0; a < kVgrnOutTile; ++a) {
        float wv[4];
        load4_shared(w + row[a] + i, wv);
        RESIDENT_UNROLL
        for (int q = 0; q < 4; ++q) acc[a] = fmaf(wv[q], xv[q], acc[a]);
      }
    }
    for (; i < in; ++i) {
      const float xv = f(x[i * kVgrnStride + t]);
      RESIDENT_UNROLL
      for (int a = 0; a < kVgrnOutTile; ++a) acc[a] = fmaf(w[row[a] + i], xv, acc[a]);
    }
    RESIDENT_UNROLL
    for (int a = 0; a < kVgrnOutTile; ++a)
      if (k0 + a < out) emit(k0 + a, acc[a]);
  }
}

// emit(i, sum_{k < kdim} W[k ld + i] x[k S + t]) for i < out (W^T x); ld a multiple of 16 >= out
// (tile columns past `out` read the zero padding and are not emitted).
template <class Emit>
RESIDENT_HD void vgrn_row_product_t(const float* w, int ld, int kdim, int out, const float* x,
                                    int t, Emit emit) {
  for (int i0 = 0; i0 < out; i0 += kVgrnOutTile) {
    float acc[kVgrnOutTile];
    RESIDENT_UNROLL
    for (int a = 0; a < kVgrnOutTile; ++a) acc[a] = 0.0f;
    for (int k = 0; k < kdim; ++k) {
      const float xv = x[k * kVgrnStride + t];
      const float* wr = w + k * ld + i0;
      RESIDENT_UNROLL
      for (int q = 0; q < kVgrnOutTile; q += 4) {
        float wv[4];
        load4_shared(wr + q, wv);
        RESIDENT_UNROLL
        for (int b = 0; b < 4; ++b) acc[q + b] = fmaf(wv[b], xv, acc[q + b]);
      }
    }
    RESIDENT_UNROLL
    for (int a = 0; a < kVgrnOutTile; ++a)
      if (i0 + a < out) emit(i0 + a, acc[a]);
  }
}

// ----- whole-tile passes

// Variable j's weights into shared memory (the padding zero).
RESIDENT_HD inline void vgrn_load_weights(float* s, const VgrnLayout& l, const VgrnWeights& w,
                                          int j, int tid, int threads) {
  const int H = l.hidden, dc = l.prescale;
  const auto matrix = [&](int off, int ld, const float* src, int rows, int cols) {
    const float* m = src + static_cast<long long>(j) * rows * cols;
    for (int i = tid; i < rows * ld; i += threads) {
      const int r = i / ld, c = i % ld;
      s[off + i] = c < cols ? m[r * cols + c] : 0.0f;
    }
  };
  const auto vector = [&](int off, const float* src, int n) {
    const float* v = src + static_cast<long long>(j) * n;
    for (int i = tid; i < vgrn_round_up(n, 4); i += threads) s[off + i] = i < n ? v[i] : 0.0f;
  };
  matrix(l.w1, l.ld_in, w.w1, H, dc);
  matrix(l.w2, l.ld_h, w.w2, H, H);
  matrix(l.wg, l.ld_h, w.wg, 2 * H, H);
  matrix(l.ws, l.ld_in, w.ws, H, dc);
  vector(l.b1, w.b1, H);
  vector(l.b2, w.b2, H);
  vector(l.bg, w.bg, 2 * H);
  vector(l.bs, w.bs, H);
}

// Column buffer dst [width][S] = rows row0 + t of src [rows, F, width] at variable j; rows past
// `rows` read 0.
RESIDENT_HD inline void vgrn_load_rows(float* dst, const float* src, long long row0,
                                       long long rows, int features, int width, int j, int tid,
                                       int threads) {
  for (int i = tid; i < kVgrnRows * width; i += threads) {
    const int t = i / width, c = i % width;
    const long long n = row0 + t;
    dst[c * kVgrnStride + t] =
        n < rows ? src[(n * features + j) * static_cast<long long>(width) + c] : 0.0f;
  }
}

// Sums over the sub-tile's rows of one weight's gradient: work item `item` of the 4 x 4 tiles of
// dW [mo, ni], dW[k, i] = sum_t dy[k S + t] x[i S + t] (t ascending), and for the tiles of
// column block 0 db[k] = sum_t dy[k S + t]; written to the packed partial pw [mo, ni], pb [mo]
// (first sub-tile) or added to it. Rows of the sub-tile past the data carry dy = 0.
RESIDENT_HD inline void vgrn_weight_grad_tile(float* pw, float* pb, bool first, const float* dy,
                                              int mo, const float* x, int ni, int item) {
  const int col_tiles = (ni + 3) / 4;
  const int k0 = (item / col_tiles) * 4, i0 = (item % col_tiles) * 4;
  int kr[4], ir[4];
  RESIDENT_UNROLL
  for (int a = 0; a < 4; ++a) {
    kr[a] = (k0 + a < mo ? k0 + a : mo - 1) * kVgrnStride;
    ir[a] = (i0 + a < ni ? i0 + a : ni - 1) * kVgrnStride;
  }
  float acc[4][4], bias[4];
  RESIDENT_UNROLL
  for (int a = 0; a < 4; ++a) {
    bias[a] = 0.0f;
    RESIDENT_UNROLL
    for (int b = 0; b < 4; ++b) acc[a][b] = 0.0f;
  }
  const bool with_bias = i0 == 0;
  for (int t = 0; t < kVgrnRows; t += 4) {
    float d[4][4], v[4][4];
    RESIDENT_UNROLL
    for (int a = 0; a < 4; ++a) {
      load4_shared(dy + kr[a] + t, d[a]);
      load4_shared(x + ir[a] + t, v[a]);
    }
    RESIDENT_UNROLL
    for (int q = 0; q < 4; ++q) {
      RESIDENT_UNROLL
      for (int a = 0; a < 4; ++a) {
        RESIDENT_UNROLL
        for (int b = 0; b < 4; ++b) acc[a][b] = fmaf(d[a][q], v[b][q], acc[a][b]);
        if (with_bias) bias[a] += d[a][q];
      }
    }
  }
  RESIDENT_UNROLL
  for (int a = 0; a < 4; ++a) {
    if (k0 + a >= mo) continue;
    RESIDENT_UNROLL
    for (int b = 0; b < 4; ++b) {
      if (i0 + b >= ni) continue;
      float& o = pw[(k0 + a) * ni + i0 + b];
      o = first ? acc[a][b] : o + acc[a][b];
    }
    if (with_bias) pb[k0 + a] = first ? bias[a] : pb[k0 + a] + bias[a];
  }
}

RESIDENT_HD inline int vgrn_tile_items(int mo, int ni) { return ((mo + 3) / 4) * ((ni + 3) / 4); }

// The chain z1 -> eta1 -> gl -> r of row t: Z1 = W1 E + b1, ETA1 = W2 ELU(Z1) + b2,
// A = Wg ETA1 + bg, R = Ws E + bs + a * sigmoid(g) (R may be Z1's buffer: Z1 is read before).
// Returns the LayerNorm's mean and rstd of R.
struct VgrnRowStats {
  float mean, rstd;
};
RESIDENT_HD inline VgrnRowStats vgrn_row_chain(const float* s, const VgrnLayout& l, const float* E,
                                               float* Z1, float* ETA1, float* A, float* R, int t,
                                               float eps) {
  const int H = l.hidden, dc = l.prescale;
  constexpr int S = kVgrnStride;
  vgrn_row_product(s + l.w1, l.ld_in, H, dc, E, t, VgrnIdentity{},
                   [&](int k, float v) { Z1[k * S + t] = v + s[l.b1 + k]; });
  vgrn_row_product(s + l.w2, l.ld_h, H, H, Z1, t, VgrnEluOf{},
                   [&](int k, float v) { ETA1[k * S + t] = v + s[l.b2 + k]; });
  vgrn_row_product(s + l.wg, l.ld_h, 2 * H, H, ETA1, t, VgrnIdentity{},
                   [&](int k, float v) { A[k * S + t] = v + s[l.bg + k]; });
  vgrn_row_product(s + l.ws, l.ld_in, H, dc, E, t, VgrnIdentity{}, [&](int k, float v) {
    const float a = A[k * S + t], g = A[(H + k) * S + t];
    R[k * S + t] = (v + s[l.bs + k]) + a / (1.0f + expf(-g));
  });
  const float n = static_cast<float>(H);
  float sum = 0.0f;
  for (int k = 0; k < H; ++k) sum += R[k * S + t];
  const float mean = sum / n;
  float squares = 0.0f;
  for (int k = 0; k < H; ++k) {
    const float d = R[k * S + t] - mean;
    squares += d * d;
  }
  return {mean, 1.0f / sqrtf(squares / n + eps)};
}

// What both programs derive from their block: the layout, the sizes, the block's variable j and
// row chunk (block index = chunk * F + j), and E, the row buffer after the weights.
struct VgrnFrame {
  VgrnLayout l;
  int F, H, dc, T, j;
  long long chunk;
  float* E;
};

template <class Block>
RESIDENT_HD VgrnFrame vgrn_frame(const Block& block, const VgrnSizes& s, float* smem) {
  const VgrnLayout l = vgrn_layout(s.hidden, s.prescale);
  const auto F = static_cast<unsigned>(s.features);
  return {l,
          s.features,
          s.hidden,
          s.prescale,
          static_cast<int>(block.threads),
          static_cast<int>(block.index % F),
          static_cast<long long>(block.index / F),
          smem + l.weights};
}

// ----- the programs

// Forward: xhat of the block's rows of variable j.
template <class Block>
RESIDENT_HD void vgrn_forward_block(Block& block, const VgrnForwardArgs& a, float* smem) {
  const VgrnFrame fr = vgrn_frame(block, a.size, smem);
  const VgrnLayout& l = fr.l;
  const int F = fr.F, H = fr.H, dc = fr.dc, T = fr.T, j = fr.j;
  const long long chunk = fr.chunk, rows = a.size.rows;
  constexpr int S = kVgrnStride;
  float* E = fr.E;
  float* Z = E + dc * S;  // z1, then r, then xhat
  float* ETA1 = Z + H * S;
  float* A = ETA1 + H * S;
  block.phase([&](unsigned tid) { vgrn_load_weights(smem, l, a.w, j, static_cast<int>(tid), T); });
  for (int sub = 0; sub < kVgrnSubtiles; ++sub) {
    const long long row0 = chunk * kVgrnChunkRows + static_cast<long long>(sub) * kVgrnRows;
    if (row0 >= rows) break;
    block.phase([&](unsigned tid) {
      vgrn_load_rows(E, a.e, row0, rows, F, dc, j, static_cast<int>(tid), T);
    });
    block.phase([&](unsigned tid) {
      const int t = static_cast<int>(tid);
      if (t >= kVgrnRows) return;
      const VgrnRowStats st = vgrn_row_chain(smem, l, E, Z, ETA1, A, Z, t, a.size.eps);
      for (int k = 0; k < H; ++k) Z[k * S + t] = (Z[k * S + t] - st.mean) * st.rstd;
    });
    block.phase([&](unsigned tid) {
      for (int i = static_cast<int>(tid); i < kVgrnRows * H; i += T) {
        const int t = i / H, k = i % H;
        const long long n = row0 + t;
        if (n < rows) a.xhat[(n * F + j) * static_cast<long long>(H) + k] = Z[k * S + t];
      }
    });
  }
}

// Backward: de of the block's rows of variable j (accumulated) and the chunk's parameter
// gradients of variable j into partials[chunk, j, :] (rows ascending, sub-tile by sub-tile).
template <class Block>
RESIDENT_HD void vgrn_backward_block(Block& block, const VgrnBackwardArgs& a, float* smem) {
  const VgrnFrame fr = vgrn_frame(block, a.size, smem);
  const VgrnLayout& l = fr.l;
  const int F = fr.F, H = fr.H, dc = fr.dc, T = fr.T, j = fr.j;
  const long long chunk = fr.chunk, rows = a.size.rows;
  constexpr int S = kVgrnStride;
  float* E = fr.E;
  float* DX = E + dc * S;  // dxhat, then deta1
  float* Z1 = DX + H * S;  // z1, then eta2
  float* ETA1 = Z1 + H * S;
  float* A = ETA1 + H * S;  // gl, then dgl, then dz1 in its first half
  float* R = A + 2 * H * S;  // r, then dr
  float* P = a.partials + (chunk * F + j) * static_cast<long long>(l.params);
  block.phase([&](unsigned tid) { vgrn_load_weights(smem, l, a.w, j, static_cast<int>(tid), T); });
  for (int sub = 0; sub < kVgrnSubtiles; ++sub) {
    const long long row0 = chunk * kVgrnChunkRows + static_cast<long long>(sub) * kVgrnRows;
    if (row0 >= rows) break;
    const bool first = sub == 0;
    block.phase([&](unsigned tid) {
      vgrn_load_rows(E, a.e, row0, rows, F, dc, j, static_cast<int>(tid), T);
      vgrn_load_rows(DX, a.dxhat, row0, rows, F, H, j, static_cast<int>(tid), T);
    });
    // Recompute the chain; LayerNorm backward (gamma 1) into R, GLU backward into A.
    block.phase([&](unsigned tid) {
      const int t = static_cast<int>(tid);
      if (t >= kVgrnRows) return;
      const VgrnRowStats st = vgrn_row_chain(smem, l, E, Z1, ETA1, A, R, t, a.size.eps);
      const float n = static_cast<float>(H);
      float sg = 0.0f, sgx = 0.0f;
      for (int k = 0; k < H; ++k) {
        const float g = DX[k * S + t];
        sg += g;
        sgx += g * ((R[k * S + t] - st.mean) * st.rstd);
      }
      const float g_mean = sg / n, g_xhat_mean = sgx / n;
      for (int k = 0; k < H; ++k) {
        const float g = DX[k * S + t];
        const float xhat = (R[k * S + t] - st.mean) * st.rstd;
        const float dr = st.rstd * (g - g_mean - xhat * g_xhat_mean);
        R[k * S + t] = dr;
        const float value = A[k * S + t];
        const VgrnSigmoidPair sp = vgrn_sigmoid_pair(A[(H + k) * S + t]);
        A[k * S + t] = dr * sp.value;
        A[(H + k) * S + t] = dr * value * sp.value * sp.complement;
      }
    });
    // dWs, dbs from (dr, e); dWg, dbg from (dgl, eta1).
    block.phase([&](unsigned tid) {
      const int n_ws = vgrn_tile_items(H, dc), n_wg = vgrn_tile_items(2 * H, H);
      for (int item = static_cast<int>(tid); item < n_ws + n_wg; item += T) {
        if (item < n_ws)
          vgrn_weight_grad_tile(P + l.p_ws, P + l.p_bs, first, R, H, E, dc, item);
        else
          vgrn_weight_grad_tile(P + l.p_wg, P + l.p_bg, first, A, 2 * H, ETA1, H, item - n_ws);
      }
    });
    // deta1 = Wg^T dgl -> DX; dz1 = (W2^T deta1) ELU'(z1) -> A[0, H); de += Ws^T dr, then
    // de += W1^T dz1; Z1 -> eta2.
    block.phase([&](unsigned tid) {
      const int t = static_cast<int>(tid);
      if (t >= kVgrnRows) return;
      vgrn_row_product_t(smem + l.wg, l.ld_h, 2 * H, H, A, t,
                         [&](int i, float v) { DX[i * S + t] = v; });
      vgrn_row_product_t(smem + l.w2, l.ld_h, H, H, DX, t, [&](int i, float v) {
        A[i * S + t] = v * vgrn_elu_derivative(Z1[i * S + t]);
      });
      const long long n = row0 + t;
      if (n < rows) {
        float* de = a.de + (n * F + j) * static_cast<long long>(dc);
        vgrn_row_product_t(smem + l.ws, l.ld_in, H, dc, R, t,
                           [&](int c, float v) { de[c] = de[c] + v; });
        vgrn_row_product_t(smem + l.w1, l.ld_in, H, dc, A, t,
                           [&](int c, float v) { de[c] = de[c] + v; });
      }
      for (int k = 0; k < H; ++k) Z1[k * S + t] = vgrn_elu(Z1[k * S + t]);
    });
    // dW2, db2 from (deta1, eta2); dW1, db1 from (dz1, e).
    block.phase([&](unsigned tid) {
      const int n_w2 = vgrn_tile_items(H, H), n_w1 = vgrn_tile_items(H, dc);
      for (int item = static_cast<int>(tid); item < n_w2 + n_w1; item += T) {
        if (item < n_w2)
          vgrn_weight_grad_tile(P + l.p_w2, P + l.p_b2, first, DX, H, Z1, H, item);
        else
          vgrn_weight_grad_tile(P + l.p_w1, P + l.p_b1, first, A, H, E, dc, item - n_w2);
      }
    });
  }
}

// Reduce: element idx of [F, P] (variable j = idx / P, parameter p = idx % P): the chunks'
// partials summed in chunk order, added into the slab gradient.
RESIDENT_HD inline void vgrn_reduce_element(const VgrnReduceArgs& a, const VgrnLayout& l,
                                            long long idx) {
  const int P = l.params, H = l.hidden, dc = l.prescale;
  const int j = static_cast<int>(idx / P), p = static_cast<int>(idx % P);
  float sum = 0.0f;
  for (long long c = 0; c < a.chunks; ++c)
    sum += a.partials[(c * a.features + j) * static_cast<long long>(P) + p];
  float* dst;
  int local, size;
  if (p < l.p_b1) {
    dst = a.g.w1, local = p - l.p_w1, size = H * dc;
  } else if (p < l.p_w2) {
    dst = a.g.b1, local = p - l.p_b1, size = H;
  } else if (p < l.p_b2) {
    dst = a.g.w2, local = p - l.p_w2, size = H * H;
  } else if (p < l.p_wg) {
    dst = a.g.b2, local = p - l.p_b2, size = H;
  } else if (p < l.p_bg) {
    dst = a.g.wg, local = p - l.p_wg, size = 2 * H * H;
  } else if (p < l.p_ws) {
    dst = a.g.bg, local = p - l.p_bg, size = 2 * H;
  } else if (p < l.p_bs) {
    dst = a.g.ws, local = p - l.p_ws, size = H * dc;
  } else {
    dst = a.g.bs, local = p - l.p_bs, size = H;
  }
  float& g = dst[static_cast<long long>(j) * size + local];
  g = g + sum;
}

}  // namespace resident::kernels::tft
