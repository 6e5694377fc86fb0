// Block programs of the sampler's fused residual block and of its weight transpose (contracts in
// diffusion_fused_block.h; the executors DeviceBlock/HostBlock of
// kernels/models/mamba2/block_program.cuh, so the CPU test runs this very code on the host).
//
// fused_block_program: block `index` owns rows [index * kFusedBlockRows, +kFusedBlockRows) of h.
// Shared memory (floats, fused_block_shared_floats(D)): X [kFusedBlockRows][ld] (h, then LN(h)),
// A [kFusedBlockRows][ld] (the activation), P [kFusedBlockRows][kFusedLnParts] (LayerNorm
// partials), M, S [kFusedBlockRows] (mean, rstd); ld = D rounded up to 4 (16-byte rows). Phases:
// load h (rows past `rows` read 0), LayerNorm (partials over columns p, p + 32, ...; each row's
// 32 partials added in order; two passes, the variance about the mean), normalize, fc1 (thread
// tid owns columns tid, tid + threads, ... of all the tile's rows; k ascending, fma from 0, W^T
// rows read coalesced, the tile's rows 4 k at a time from shared memory), bias + temb + silu into
// A, fc2 the same way from A, then h = (h + y) + b2 for the tile's rows inside `rows`.
// fused_weights_program: block `index` transposes one 32 x 32 tile of one matrix through shared
// memory (kFusedTile x (kFusedTile + 1) floats), reads and writes coalesced.
#pragma once

#include <cmath>

#include "kernels/core/unroll.h"
#include "kernels/models/diffusion/diffusion_fused_block.h"
#include "kernels/core/shared_load.cuh"
#include "kernels/models/mamba2/block_program.cuh"

namespace resident::kernels::diffusion {

using mamba2::DeviceBlock;
using mamba2::HostBlock;

inline constexpr int kFusedBlockRows = 8;     // rows a CTA
inline constexpr int kFusedBlockThreads = 256;
inline constexpr int kFusedLnParts = 32;      // LayerNorm partials a row
inline constexpr int kFusedTile = 32;         // the transpose's tile
inline constexpr int kFusedWeightsThreads = 256;

RESIDENT_HD inline int fused_block_ld(int width) { return (width + 3) / 4 * 4; }
RESIDENT_HD inline int fused_block_shared_floats(int width) {
  return 2 * kFusedBlockRows * fused_block_ld(width) + kFusedBlockRows * kFusedLnParts +
         2 * kFusedBlockRows;
}
RESIDENT_HD inline long long fused_block_ctas(long long rows) {
  return (rows + kFusedBlockRows - 1) / kFusedBlockRows;
}
RESIDENT_HD inline int fused_weights_tiles(int width) {
  return (width + kFusedTile - 1) / kFusedTile;
}
RESIDENT_HD inline int fused_weights_shared_floats() { return kFusedTile * (kFusedTile + 1); }

struct FusedBlockArgs {
  float* h;  // [rows, D], in place
  const float *gamma, *beta;  // [D]
  const float* w1t;            // [D, D], fc1's W^T
  const float *b1, *temb;      // [D]
  const float* w2t;            // [D, D], fc2's W^T
  const float* b2;             // [D]
  long long rows;
  int width;
  float eps;
};

struct FusedWeightsArgs {
  float* wt;  // [matrices, D, D]
  const float* w[kFusedBlockMaxMatrices];  // [D, D] each, [out, in]
  int matrices;
  int width;
};

// silu(x) = x sigmoid(x), sigmoid from one expf of -|x| (kernels/nn/activation_math.cuh's form).
RESIDENT_HD inline float fused_silu(float x) {
  const float e = expf(-fabsf(x));
  const float large = 1.0f / (1.0f + e);
  const float small = e * large;
  return x * (x >= 0.0f ? large : small);
}


// emit(c, acc) for the columns c = tid, tid + threads, ... < D, acc[r] = sum_k wt[k D + c]
// x[r ld + k] (k ascending, fma from 0) for the tile's rows r.
template <class Emit>
RESIDENT_HD void fused_tile_product(const float* wt, const float* x, int D, int ld, int tid,
                                    int threads, Emit emit) {
  for (int c = tid; c < D; c += threads) {
    float acc[kFusedBlockRows];
    RESIDENT_UNROLL
    for (int r = 0; r < kFusedBlockRows; ++r) acc[r] = 0.0f;
    const float* wc = wt + c;
    int k = 0;
    for (; k + 4 <= D; k += 4) {
      float w[4];
      RESIDENT_UNROLL
      for (int q = 0; q < 4; ++q) w[q] = wc[static_cast<long long>(k + q) * D];
      RESIDENT_UNROLL
      for (int r = 0; r < kFusedBlockRows; ++r) {
        float v[4];
        load4_shared(x + r * ld + k, v);
        RESIDENT_UNROLL
        for (int q = 0; q < 4; ++q) acc[r] = fmaf(w[q], v[q], acc[r]);
      }
    }
    for (; k < D; ++k) {
      const float w = wc[static_cast<long long>(k) * D];
      RESIDENT_UNROLL
      for (int r = 0; r < kFusedBlockRows; ++r) acc[r] = fmaf(w, x[r * ld + k], acc[r]);
    }
    emit(c, acc);
  }
}

template <class Block>
RESIDENT_HD void fused_block_program(Block& block, const FusedBlockArgs& a, float* smem) {
  const int D = a.width, ld = fused_block_ld(D), T = static_cast<int>(block.threads);
  constexpr int TR = kFusedBlockRows, NP = kFusedLnParts;
  const long long row0 = static_cast<long long>(block.index) * TR;
  float* X = smem;
  float* A = X + TR * ld;
  float* P = A + TR * ld;
  float* M = P + TR * NP;
  float* S = M + TR;
  const float n = static_cast<float>(D);

  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < TR * D; i += T) {
      const int r = i / D, c = i % D;
      const long long row = row0 + r;
      X[r * ld + c] = row < a.rows ? a.h[row * D + c] : 0.0f;
    }
  });
  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < TR * NP; i += T) {
      const int r = i / NP, p = i % NP;
      float sum = 0.0f;
      for (int c = p; c < D; c += NP) sum += X[r * ld + c];
      P[i] = sum;
    }
  });
  block.phase([&](unsigned tid) {
    const int r = static_cast<int>(tid);
    if (r >= TR) return;
    float sum = 0.0f;
    for (int p = 0; p < NP; ++p) sum += P[r * NP + p];
    M[r] = sum / n;
  });
  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < TR * NP; i += T) {
      const int r = i / NP, p = i % NP;
      const float mean = M[r];
      float squares = 0.0f;
      for (int c = p; c < D; c += NP) {
        const float d = X[r * ld + c] - mean;
        squares += d * d;
      }
      P[i] = squares;
    }
  });
  block.phase([&](unsigned tid) {
    const int r = static_cast<int>(tid);
    if (r >= TR) return;
    float squares = 0.0f;
    for (int p = 0; p < NP; ++p) squares += P[r * NP + p];
    S[r] = 1.0f / sqrtf(squares / n + a.eps);
  });
  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < TR * D; i += T) {
      const int r = i / D, c = i % D;
      float& x = X[r * ld + c];
      x = (x - M[r]) * S[r] * a.gamma[c] + a.beta[c];
    }
  });
  block.phase([&](unsigned tid) {
    fused_tile_product(a.w1t, X, D, ld, static_cast<int>(tid), T,
                       [&](int c, const float (&acc)[TR]) {
                         const float b = a.b1[c], e = a.temb[c];
                         RESIDENT_UNROLL
                         for (int r = 0; r < TR; ++r) A[r * ld + c] = fused_silu(acc[r] + b + e);
                       });
  });
  block.phase([&](unsigned tid) {
    fused_tile_product(a.w2t, A, D, ld, static_cast<int>(tid), T,
                       [&](int c, const float (&acc)[TR]) {
                         const float b = a.b2[c];
                         RESIDENT_UNROLL
                         for (int r = 0; r < TR; ++r) {
                           const long long row = row0 + r;
                           if (row < a.rows) {
                             float& h = a.h[row * D + c];
                             h = h + acc[r] + b;
                           }
                         }
                       });
  });
}

// Block `index` = (m * tiles + tile_in) * tiles + tile_out: wt[m][i][o] = w[m][o D + i] for the
// tile's i, o < D.
template <class Block>
RESIDENT_HD void fused_weights_program(Block& block, const FusedWeightsArgs& a, float* smem) {
  const int D = a.width, tiles = fused_weights_tiles(D), T = static_cast<int>(block.threads);
  constexpr int K = kFusedTile, LD = kFusedTile + 1;
  const int tile_out = static_cast<int>(block.index % static_cast<unsigned>(tiles));
  const int tile_in = static_cast<int>((block.index / static_cast<unsigned>(tiles)) %
                                       static_cast<unsigned>(tiles));
  const int m = static_cast<int>(block.index / static_cast<unsigned>(tiles * tiles));
  const float* w = a.w[m];
  float* wt = a.wt + static_cast<long long>(m) * D * D;
  block.phase([&](unsigned tid) {
    for (int e = static_cast<int>(tid); e < K * K; e += T) {
      const int o = tile_out * K + e / K, i = tile_in * K + e % K;
      smem[(e / K) * LD + e % K] = o < D && i < D ? w[static_cast<long long>(o) * D + i] : 0.0f;
    }
  });
  block.phase([&](unsigned tid) {
    for (int e = static_cast<int>(tid); e < K * K; e += T) {
      const int i = tile_in * K + e / K, o = tile_out * K + e % K;
      if (i < D && o < D) wt[static_cast<long long>(i) * D + o] = smem[(e % K) * LD + e / K];
    }
  });
}

}  // namespace resident::kernels::diffusion
