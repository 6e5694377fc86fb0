// Block programs of the Mamba2 row norms (contracts in row_norms.h; executors in
// block_program.cuh). Block `block.index` owns rows [index * kNormRowsPerBlock, +32).
// Shared memory: kNormThreads + kNormRowsPerBlock floats.
#pragma once

#include "kernels/core/unroll.h"
#include "kernels/models/mamba2/block_program.cuh"
#include "kernels/models/mamba2/row_norms.h"

namespace resident::kernels::mamba2 {

inline constexpr int kNormSharedFloats = kNormThreads + kNormRowsPerBlock;

template <class Block>
RESIDENT_HD void residual_rms_norm_forward_block(Block& block, const ResidualRmsNormForwardArgs& a,
                                                 float* smem) {
  float* red = smem;                  // [rows per block][lanes]
  float* rs = smem + kNormThreads;    // [rows per block]
  const int row0 = static_cast<int>(block.index) * kNormRowsPerBlock;
  const int T = static_cast<int>(block.threads);
  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < kNormThreads; i += T) {
      const int r = row0 + i / kNormLanes;
      float acc = 0.0f;
      if (r < a.rows) {
        for (int c = i % kNormLanes; c < a.cols; c += kNormLanes) {
          const long long e = static_cast<long long>(r) * a.cols + c;
          float v = a.h_in[e];
          if (a.delta != nullptr) v += a.delta[e];
          if (a.bias != nullptr) v += a.bias[c];
          a.h_out[e] = v;
          acc += v * v;
        }
      }
      red[i] = acc;
    }
  });
  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < kNormRowsPerBlock; i += T) {
      float sum = 0.0f;
      for (int l = 0; l < kNormLanes; ++l) sum += red[i * kNormLanes + l];
      const float s = 1.0f / sqrtf(sum / static_cast<float>(a.cols) + a.eps);
      rs[i] = s;
      if (row0 + i < a.rows) a.rstd[row0 + i] = s;
    }
  });
  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < kNormRowsPerBlock * a.cols; i += T) {
      const int rl = i / a.cols, c = i % a.cols;
      const int r = row0 + rl;
      if (r >= a.rows) continue;
      const long long e = static_cast<long long>(r) * a.cols + c;
      a.u[e] = a.h_out[e] * rs[rl] * a.weight[c];
    }
  });
}

template <class Block>
RESIDENT_HD void residual_rms_norm_backward_block(Block& block,
                                                  const ResidualRmsNormBackwardArgs& a,
                                                  float* smem) {
  float* red = smem;
  float* coef = smem + kNormThreads;
  const int row0 = static_cast<int>(block.index) * kNormRowsPerBlock;
  const int T = static_cast<int>(block.threads);
  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < kNormThreads; i += T) {
      const int r = row0 + i / kNormLanes;
      float acc = 0.0f;
      if (r < a.rows)
        for (int c = i % kNormLanes; c < a.cols; c += kNormLanes) {
          const long long e = static_cast<long long>(r) * a.cols + c;
          acc += a.du[e] * a.weight[c] * a.h[e];
        }
      red[i] = acc;
    }
  });
  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < kNormRowsPerBlock; i += T) {
      float sum = 0.0f;
      for (int l = 0; l < kNormLanes; ++l) sum += red[i * kNormLanes + l];
      const int r = row0 + i;
      const float s = r < a.rows ? a.rstd[r] : 0.0f;
      coef[i] = s * s * s * sum / static_cast<float>(a.cols);
    }
  });
  // Per column (threads of a warp on consecutive columns: coalesced): the dh update of the
  // block's rows and, in the same pass, the column sums (rows in order).
  block.phase([&](unsigned tid) {
    for (int c = static_cast<int>(tid); c < a.cols; c += T) {
      const float w = a.weight[c];
      float pw = 0.0f, pdh = 0.0f;
      RESIDENT_UNROLL_BY(8)
      for (int rl = 0; rl < kNormRowsPerBlock; ++rl) {
        const int r = row0 + rl;
        if (r >= a.rows) break;
        const long long e = static_cast<long long>(r) * a.cols + c;
        const float s = a.rstd[r], du = a.du[e], h = a.h[e];
        const float dh = a.dh[e] + (s * du * w - h * coef[rl]);
        a.dh[e] = dh;
        pw += du * h * s;
        pdh += dh;
      }
      const long long out = static_cast<long long>(block.index) * a.cols + c;
      a.partial_weight[out] = pw;
      if (a.partial_dh != nullptr) a.partial_dh[out] = pdh;
    }
  });
}

template <class Block>
RESIDENT_HD void gated_rms_norm_forward_block(Block& block, const GatedRmsNormForwardArgs& a,
                                              float* smem) {
  float* red = smem;
  float* rs = smem + kNormThreads;
  const int row0 = static_cast<int>(block.index) * kNormRowsPerBlock;
  const int T = static_cast<int>(block.threads);
  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < kNormThreads; i += T) {
      const int r = row0 + i / kNormLanes;
      float acc = 0.0f;
      if (r < a.rows)
        for (int c = i % kNormLanes; c < a.cols; c += kNormLanes) {
          const float g = a.y[static_cast<long long>(r) * a.cols + c] *
                          silu_f(a.z[static_cast<long long>(r) * a.z_stride + c]);
          acc += g * g;
        }
      red[i] = acc;
    }
  });
  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < kNormRowsPerBlock; i += T) {
      float sum = 0.0f;
      for (int l = 0; l < kNormLanes; ++l) sum += red[i * kNormLanes + l];
      const float s = 1.0f / sqrtf(sum / static_cast<float>(a.cols) + a.eps);
      rs[i] = s;
      if (row0 + i < a.rows) a.rstd[row0 + i] = s;
    }
  });
  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < kNormRowsPerBlock * a.cols; i += T) {
      const int rl = i / a.cols, c = i % a.cols;
      const int r = row0 + rl;
      if (r >= a.rows) continue;
      const long long e = static_cast<long long>(r) * a.cols + c;
      const float g = a.y[e] * silu_f(a.z[static_cast<long long>(r) * a.z_stride + c]);
      a.yn[e] = g * rs[rl] * a.weight[c];
    }
  });
}

template <class Block>
RESIDENT_HD void gated_rms_norm_backward_block(Block& block, const GatedRmsNormBackwardArgs& a,
                                               float* smem) {
  float* red = smem;
  float* coef = smem + kNormThreads;
  const int row0 = static_cast<int>(block.index) * kNormRowsPerBlock;
  const int T = static_cast<int>(block.threads);
  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < kNormThreads; i += T) {
      const int r = row0 + i / kNormLanes;
      float acc = 0.0f;
      if (r < a.rows)
        for (int c = i % kNormLanes; c < a.cols; c += kNormLanes) {
          const long long e = static_cast<long long>(r) * a.cols + c;
          const float g = a.y[e] * silu_f(a.z[static_cast<long long>(r) * a.z_stride + c]);
          acc += a.dyn[e] * a.weight[c] * g;
        }
      red[i] = acc;
    }
  });
  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < kNormRowsPerBlock; i += T) {
      float sum = 0.0f;
      for (int l = 0; l < kNormLanes; ++l) sum += red[i * kNormLanes + l];
      const int r = row0 + i;
      const float s = r < a.rows ? a.rstd[r] : 0.0f;
      coef[i] = s * s * s * sum / static_cast<float>(a.cols);
    }
  });
  // Per column (coalesced across a warp): dy and dz of the block's rows and, in the same pass,
  // the weight's column sum (rows in order).
  block.phase([&](unsigned tid) {
    for (int c = static_cast<int>(tid); c < a.cols; c += T) {
      const float w = a.weight[c];
      float pw = 0.0f;
      RESIDENT_UNROLL_BY(8)
      for (int rl = 0; rl < kNormRowsPerBlock; ++rl) {
        const int r = row0 + rl;
        if (r >= a.rows) break;
        const long long e = static_cast<long long>(r) * a.cols + c;
        const float zv = a.z[static_cast<long long>(r) * a.z_stride + c];
        const float sz = silu_f(zv);
        const float yv = a.y[e], dyn = a.dyn[e], s = a.rstd[r];
        const float g = yv * sz;
        const float dg = s * dyn * w - g * coef[rl];
        a.dy[e] = dg * sz;
        a.dz[static_cast<long long>(r) * a.dz_stride + c] = dg * yv * silu_grad_f(zv);
        pw += dyn * g * s;
      }
      a.partial_weight[static_cast<long long>(block.index) * a.cols + c] = pw;
    }
  });
}

}  // namespace resident::kernels::mamba2
