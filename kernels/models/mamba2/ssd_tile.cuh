// 4 x 4 register tiles for the SSD block programs' in-chunk products (ssd_forward.cuh,
// ssd_backward.cuh): one thread owns a 4 x 4 block of outputs and reads each shared-memory
// operand once per inner step for 16 FMAs (a thread per output reads two per FMA). Tile rows
// and columns past the matrix edge read a clamped (valid) row and are not stored; every sum runs
// in a fixed order (the inner index ascending).
#pragma once

#include "kernels/core/unroll.h"
#include "kernels/models/mamba2/block_program.cuh"

namespace resident::kernels::mamba2 {

inline constexpr int kTile = 4;

RESIDENT_HD inline int tiles_for(int n) { return (n + kTile - 1) / kTile; }

// The 4 row indices of tile `t`, clamped into [0, n).
RESIDENT_HD inline void tile_rows(int t, int n, int (&rows)[kTile]) {
  RESIDENT_UNROLL
  for (int a = 0; a < kTile; ++a) rows[a] = t * kTile + a < n ? t * kTile + a : n - 1;
}

// Tile k of the lower triangle {(ti, tj): tj <= ti}, numbered row by row.
RESIDENT_HD inline void lower_triangle_tile(int k, int& ti, int& tj) {
  int r = static_cast<int>((sqrtf(8.0f * static_cast<float>(k) + 1.0f) - 1.0f) * 0.5f);
  while ((r + 1) * (r + 2) / 2 <= k) ++r;
  while (r * (r + 1) / 2 > k) --r;
  ti = r;
  tj = k - r * (r + 1) / 2;
}

// acc[a][b] += u[a] * v[b]
RESIDENT_HD inline void tile_outer_add(float (&acc)[kTile][kTile], const float (&u)[kTile],
                                       const float (&v)[kTile]) {
  RESIDENT_UNROLL
  for (int a = 0; a < kTile; ++a) {
    RESIDENT_UNROLL
    for (int b = 0; b < kTile; ++b) acc[a][b] += u[a] * v[b];
  }
}

// acc[a][b] += sum_{k < K} X[rx[a] * ldx + k] * Y[ry[b] * ldy + k]   (rows of X and Y dotted)
RESIDENT_HD inline void tile_row_dots(float (&acc)[kTile][kTile], const float* X, int ldx,
                                      const int (&rx)[kTile], const float* Y, int ldy,
                                      const int (&ry)[kTile], int K) {
  for (int k = 0; k < K; ++k) {
    float x[kTile], y[kTile];
    RESIDENT_UNROLL
    for (int a = 0; a < kTile; ++a) {
      x[a] = X[rx[a] * ldx + k];
      y[a] = Y[ry[a] * ldy + k];
    }
    tile_outer_add(acc, x, y);
  }
}

RESIDENT_HD inline void tile_zero(float (&acc)[kTile][kTile]) {
  RESIDENT_UNROLL
  for (int a = 0; a < kTile; ++a) {
    RESIDENT_UNROLL
    for (int b = 0; b < kTile; ++b) acc[a][b] = 0.0f;
  }
}

}  // namespace resident::kernels::mamba2
