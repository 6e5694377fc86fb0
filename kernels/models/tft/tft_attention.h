// TFT's interpretable multi-head attention for one query per window (kernels/models/tft/
// tft_attention_forward.cu, tft_attention_backward.cu; tests/reference/tft_reference.h step 6 is
// the definition). The projections q = theta_q Wq^T + bq [B, H], K = theta Wk^T + bk [B, L, H],
// V = theta Wv^T + bv [B, L, dv] (dv = dk = H / nh, one V shared by the heads) and the output
// Linear are cuBLAS GEMMs of the model; these kernels do the per-window part, one block per
// window, one thread per step:
//   forward   A_h[t] = softmax over t <= query_step of q_h . K_{t,h} / sqrt(dk)  (causal mask;
//             masked steps get exactly 0), abar[t] = mean_h A_h[t], mixed = sum_t abar[t] V_t
//             -> probs [B, nh, L], abar [B, L], mixed [B, dv] (overwritten)
//   backward  from dmixed [B, dv]: dabar[t] = dmixed . V_t, dV_t = abar[t] dmixed,
//             ds_h[t] = A_h[t] (dabar[t] / nh - sum_t' A_h[t'] dabar[t'] / nh) / sqrt(dk),
//             dq_h = sum_t ds_h[t] K_{t,h}, dK_{t,h} = ds_h[t] q_h
//             -> dq [B, H], dK [B, L, H], dV [B, L, dv] (overwritten)
// Reductions over t run in a fixed order (a shared-memory tree over a power-of-two block, then
// serial sums over t): deterministic, no atomics. L <= 1024, query_step < L. Outputs must not
// alias inputs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::tft {

struct AttentionShape {
  std::size_t batch = 0, steps = 0, hidden = 0, heads = 0;
  std::size_t query_step = 0;  // the query's step: keys t <= query_step are visible
};

void launch_attention_forward(float* probs, float* abar, float* mixed, const float* q,
                              const float* keys, const float* values,
                              const AttentionShape& shape, cudaStream_t stream);

void launch_attention_backward(float* dq, float* dkeys, float* dvalues, const float* dmixed,
                               const float* q, const float* keys, const float* values,
                               const float* probs, const float* abar,
                               const AttentionShape& shape, cudaStream_t stream);

}  // namespace resident::kernels::tft
