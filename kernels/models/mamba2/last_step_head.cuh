// Block programs of the last-step head (contract in last_step_head.h): block `index` = b.
#pragma once

#include "kernels/models/mamba2/block_program.cuh"
#include "kernels/models/mamba2/last_step_head.h"

namespace resident::kernels::mamba2 {

template <class Block>
RESIDENT_HD void last_step_head_forward_block(Block& block, const LastStepHeadForwardArgs& a,
                                              float* smem) {
  const int D = a.d_model, O = a.outputs, T = static_cast<int>(block.threads);
  const int b = static_cast<int>(block.index);
  const long long src = (static_cast<long long>(b) * a.length + a.length - 1) * D;
  float* v = smem;       // [D]
  float* hf = smem + D;  // [D]
  float* rs = hf + D;    // [1]
  block.phase([&](unsigned tid) {
    for (int c = static_cast<int>(tid); c < D; c += T) {
      const float x = a.h_prev[src + c] + a.delta[src + c];
      v[c] = x;
      a.h_last[static_cast<long long>(b) * D + c] = x;
    }
  });
  block.phase([&](unsigned tid) {
    if (tid != 0) return;
    float s = 0.0f;
    for (int c = 0; c < D; ++c) s += v[c] * v[c];
    rs[0] = 1.0f / sqrtf(s / static_cast<float>(D) + a.eps);
    a.rstd[b] = rs[0];
  });
  block.phase([&](unsigned tid) {
    for (int c = static_cast<int>(tid); c < D; c += T) hf[c] = v[c] * rs[0] * a.norm_w[c];
  });
  block.phase([&](unsigned tid) {
    for (int o = static_cast<int>(tid); o < O; o += T) {
      float s = a.head_b[o];
      for (int c = 0; c < D; ++c) s += hf[c] * a.head_w[static_cast<long long>(o) * D + c];
      a.pred[static_cast<long long>(b) * O + o] = s;
    }
  });
}

template <class Block>
RESIDENT_HD void last_step_head_backward_block(Block& block, const LastStepHeadBackwardArgs& a,
                                               float* smem) {
  const int D = a.d_model, O = a.outputs, L = a.length, T = static_cast<int>(block.threads);
  const int b = static_cast<int>(block.index);
  const float s = a.rstd[b];
  const float* hl = a.h_last + static_cast<long long>(b) * D;
  const float* dp = a.dpred + static_cast<long long>(b) * O;
  float* g = smem;          // [D] dhf * w
  float* prod = smem + D;   // [D] g * h
  float* coef = prod + D;   // [1]
  block.phase([&](unsigned tid) {
    for (int c = static_cast<int>(tid); c < D; c += T) {
      const float hf = hl[c] * s * a.norm_w[c];
      float dhf = 0.0f;
      for (int o = 0; o < O; ++o) {
        dhf += dp[o] * a.head_w[static_cast<long long>(o) * D + c];
        a.partial_head_w[(static_cast<long long>(b) * O + o) * D + c] = dp[o] * hf;
      }
      g[c] = dhf * a.norm_w[c];
      prod[c] = g[c] * hl[c];
      a.partial_norm_w[static_cast<long long>(b) * D + c] = dhf * hl[c] * s;
    }
    for (int o = static_cast<int>(tid); o < O; o += T)
      a.partial_head_b[static_cast<long long>(b) * O + o] = dp[o];
  });
  block.phase([&](unsigned tid) {
    if (tid != 0) return;
    float dot = 0.0f;
    for (int c = 0; c < D; ++c) dot += prod[c];
    coef[0] = s * s * s * dot / static_cast<float>(D);
  });
  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < L * D; i += T) {
      const int t = i / D, c = i % D;
      a.dh[(static_cast<long long>(b) * L + t) * D + c] =
          t == L - 1 ? s * g[c] - hl[c] * coef[0] : 0.0f;
    }
  });
}

}  // namespace resident::kernels::mamba2
