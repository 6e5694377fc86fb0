// The mLSTM cell in the parallel stabilized form (MODELS.md section 2; the double definition is
// tests/reference/xlstm_reference.h), one thread block per (sample, head), the whole window in
// shared memory (one chunk: no time loop). Per head over t, s in [0, L):
//   F_t = sum_{j <= t} logsigmoid(f~_j);  logD_ts = F_t - F_s + i~_s (s <= t)
//   m_t = max_s logD_ts;  C_ts = (q_t . k_s / sqrt(DH)) exp(logD_ts - m_t)   (exp args <= 0)
//   r_t = sum_s C_ts;  n_t = max(|r_t|, exp(-m_t));  h_t = sum_s C_ts v_s / (n_t + eps)
// Layout: rows are (sample, step), row-major [batch * L, .]: qkv [rows, 3 Di] (q in columns
// [0, Di), k in [Di, 2 Di), v in [2 Di, 3 Di); head h owns columns h * DH .. h * DH + DH - 1 of
// each), gates [rows, 2 NH] (input gate of head h in column h, forget gate in NH + h), h [rows,
// Di]; m, n, r [batch, NH, L].
// Deterministic: every sum in a fixed order, no atomics. Nothing allocated or synchronized.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::xlstm {

struct MlstmCellShape {
  int batch = 0;
  int window = 0;  // L
  int heads = 0;   // NH
  int head_dim = 0;  // DH; Di = NH * DH
  float eps = 1e-6f;
};

// Dynamic shared memory of each kernel, and the setup call that raises the kernels' limits to
// them (throws resident::Error when the device's opt-in limit is smaller). Call once at setup,
// before any launch (and before a graph capture).
std::size_t mlstm_cell_forward_shared_bytes(int window, int head_dim);
std::size_t mlstm_cell_backward_shared_bytes(int window, int head_dim);
void mlstm_cell_configure_shared_memory(int window, int head_dim);

// h (overwritten), m, n, r (overwritten, saved for the backward) from qkv and gates.
void launch_mlstm_cell_forward(float* h, float* m, float* n, float* r, const float* qkv,
                               const float* gates, const MlstmCellShape& shape,
                               cudaStream_t stream);

// With m held constant (h does not depend on it up to eps):
//   dn_t = -<dh_t, h_t> / (n_t + eps);  dC_ts = <dh_t, v_s> / (n_t + eps) + dn_t sign(r_t)
//   [|r_t| >= exp(-m_t)];  dv_s = sum_t C_ts dh_t / (n_t + eps);  dq_t = sum_s dC_ts D'_ts k_s /
//   sqrt(DH);  dk_s = sum_t dC_ts D'_ts q_t / sqrt(DH);  G = dC o C;  di~_s = sum_t G_ts;
//   dF_t = sum_s G_ts - sum_t' G_t't;  df~_j = sigmoid(-f~_j) sum_{t >= j} dF_t
// dqkv's q, k, v columns and dgates (both layouts as qkv and gates) are overwritten. h is the
// forward's output.
void launch_mlstm_cell_backward(float* dqkv, float* dgates, const float* qkv, const float* gates,
                                const float* h, const float* m, const float* n, const float* r,
                                const float* dh, const MlstmCellShape& shape,
                                cudaStream_t stream);

}  // namespace resident::kernels::xlstm
