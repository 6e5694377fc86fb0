// The Mamba2 model's output end on the last time step (last_step_head.cu), one block per
// sequence b:
//   forward   h_last[b] = h_prev[b, L-1] + delta[b, L-1];  hf = RMSNorm(h_last[b]) * norm_w;
//             pred[b] = hf head_w^T + head_b
//   backward  dh [b, t, :] = 0 for t < L-1 and the RMSNorm backward of dhf = dpred[b] head_w at
//             t = L-1 (overwritten: it starts the residual stream's gradient); per-sequence
//             partials (overwritten) partial_head_w[b] = dpred[b] (x) hf, partial_head_b[b] =
//             dpred[b], partial_norm_w[b] = dhf * h_last * rstd, summed over b by the caller.
// Row-major device floats; deterministic (fixed orders, no atomics); capturable.
#pragma once

#include <cuda_runtime_api.h>

namespace resident::kernels::mamba2 {

inline constexpr int kHeadThreads = 128;

struct LastStepHeadForwardArgs {
  float* pred = nullptr;           // [batch, outputs]
  float* h_last = nullptr;         // [batch, D] saved for the backward
  float* rstd = nullptr;           // [batch]
  const float* h_prev = nullptr;   // [batch * L, D]
  const float* delta = nullptr;    // [batch * L, D]
  const float* norm_w = nullptr;   // [D]
  const float* head_w = nullptr;   // [outputs, D]
  const float* head_b = nullptr;   // [outputs]
  int batch = 0;
  int length = 0;
  int d_model = 0;
  int outputs = 0;
  float eps = 1e-5f;
};

struct LastStepHeadBackwardArgs {
  float* dh = nullptr;              // [batch * L, D]
  float* partial_head_w = nullptr;  // [batch, outputs * D]
  float* partial_head_b = nullptr;  // [batch, outputs]
  float* partial_norm_w = nullptr;  // [batch, D]
  const float* dpred = nullptr;     // [batch, outputs]
  const float* h_last = nullptr;
  const float* rstd = nullptr;
  const float* norm_w = nullptr;
  const float* head_w = nullptr;
  int batch = 0;
  int length = 0;
  int d_model = 0;
  int outputs = 0;
};

// Shared floats of one block: 2 * D + 1.
inline int last_step_head_shared_floats(int d_model) { return 2 * d_model + 1; }

void launch_last_step_head_forward(const LastStepHeadForwardArgs& args, cudaStream_t stream);
void launch_last_step_head_backward(const LastStepHeadBackwardArgs& args, cudaStream_t stream);

}  // namespace resident::kernels::mamba2
