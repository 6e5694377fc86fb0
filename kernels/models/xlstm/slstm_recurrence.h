// The sLSTM recurrence (MODELS.md section 2; the double definition is
// tests/reference/xlstm_reference.h), one thread block per (sample, head) carrying its head's
// state through every step of the window, the head's recurrent weights in shared memory:
//   raw_g,t = wx_g,t + b_g + R_g h_{t-1}      g in i, f, z, o; R_g block-diagonal per head
//   m_t = max(i~, logsigmoid(f~) + m_{t-1}) (m_0 = i~_0);  i' = exp(i~ - m_t)
//   f' = exp(logsigmoid(f~) + m_{t-1} - m_t);  c_t = f' c_{t-1} + i' tanh(z~)
//   n_t = f' n_{t-1} + i';  h_t = sigmoid(o~) c_t / n_t        (h_{-1} = c_{-1} = n_{-1} = 0)
// Layout: rows are (sample, step), [batch * L, .]; wx, raw [rows, 4 D] (gate g of unit u in
// column g * D + u, unit u = head * DHs + j); b [4 D]; R [4, NH, DHs, DHs] (R[g, head, j, k]
// multiplies h[head * DHs + k] into unit head * DHs + j); c, n, m, h [rows, D].
// Deterministic (each sum one thread's fixed order; the recurrent weights' gradient is summed per
// sample in step order, then over samples in order). Nothing allocated or synchronized.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/core/grad_mode.h"

namespace resident::kernels::xlstm {

inline constexpr int kSlstmMaxHeadDim = 32;  // DHs: shared memory holds R and its gradient

struct SlstmShape {
  int batch = 0;
  int window = 0;    // L
  int heads = 0;     // NH
  int head_dim = 0;  // DHs in [1, kSlstmMaxHeadDim]; D = NH * DHs
};

// raw, c, n, m, h overwritten (all saved for the backward).
void launch_slstm_forward(float* raw, float* c, float* n, float* m, float* h, const float* wx,
                          const float* bias, const float* R, const SlstmShape& shape,
                          cudaStream_t stream);

// Floats of r_partials the backward needs: batch * 4 * D * DHs.
std::size_t slstm_backward_partial_floats(const SlstmShape& shape);

// The reverse-time loop for dh [rows, D] (the gradient of every h_t from above; read only), m
// held constant (h does not depend on it):
//   dh_t += R^T draw_{t+1};  dc += dh o(~)/n;  dn -= dh h/n;  draw_o = dh (c/n) o (1 - o)
//   draw_z = dc i' (1 - tanh^2 z~);  draw_i = i' (tanh(z~) dc + dn)
//   draw_f = f' (dc c_{t-1} + dn n_{t-1}) (1 - sigmoid(f~)) (0 at t = 0);  carry f' dc, f' dn
// draw [rows, 4 D] overwritten (the gradient of raw: of wx and, summed over rows, of b);
// r_partials [batch, 4, NH, DHs, DHs] overwritten with each sample's sum over t of
// draw_t h_{t-1}^T; then dR [4, NH, DHs, DHs] overwritten or accumulated as `mode` says with the
// sum over samples in order (a second kernel).
void launch_slstm_backward(float* draw, float* dR, float* r_partials, const float* raw,
                           const float* c, const float* n, const float* m, const float* h,
                           const float* dh, const float* R, const SlstmShape& shape,
                           nn::GradMode mode, cudaStream_t stream);

}  // namespace resident::kernels::xlstm
