// Plain C++ double-precision forward and backward of the xLSTM supervised model (MODELS.md
// section 2, NX-AI/xlstm): the oracle of the GPU model (lib/models/xlstm) and of its kernels.
// Written for clarity, not speed; the backward is checked against central finite differences
// (tests/models/xlstm/xlstm_reference_test.cpp).
//
// Model, for one window x [L, F] (time-major, x[t * F + f]):
//   h = x We^T + be                                           embed, Linear F -> D
//   per block b (sLSTM at b == slstm_at, mLSTM otherwise):
//     mLSTM block:  h = h + mLSTM(LN(h) * norm_w)
//     sLSTM block:  h = h + w_out * GN(sLSTM(LN(h) * norm_w));  h = h + FFN(LN(h) * ffn_norm_w)
//   pred = (LN(h[L-1]) * post_w) Wo^T + bo                    readout on the last step
// Every LN is a LayerNorm without bias (eps 1e-5); GN is a LayerNorm per head (no weight of its
// own here: the per-channel weight is applied after it), eps 1e-5.
//
// mLSTM layer (Di inner width, NH heads of DH = Di / NH, qkv blocks of 4):
//   [x_m | z] = u Wup^T                          [2Di, D], no bias
//   x_c = SiLU(conv4(x_m))                      causal depthwise, kernel K, bias
//   q = HW(x_c, Wq), k = HW(x_c, Wk), v = HW(x_m, Wv)   headwise 4x4 blocks, no bias
//   [i~ | f~] = [q, k, v] Wg^T + bg             [2 NH, 3 Di]: rows 0..NH input gates, then forget
//   per head: h~ = cell(q, k, v, i~, f~)        the parallel stabilized form (below)
//   out = ((w_out * GN(h~)) + skip * x_c) * SiLU(z),  result = out Wdown^T  [D, Di], no bias
// mLSTM cell, parallel stabilized form, per head over t, s in [0, L):
//   F_t = sum_{j <= t} logsigmoid(f~_j);  logD_ts = F_t - F_s + i~_s (s <= t), -inf otherwise
//   m_t = max_s logD_ts;  C_ts = (q_t . k_s / sqrt(DH)) exp(logD_ts - m_t)   (exp args <= 0)
//   r_t = sum_s C_ts;  n_t = max(|r_t|, exp(-m_t));  h_t = sum_s C_ts v_s / (n_t + eps)
// sLSTM layer (NH heads of DHs = D / NH; gates g in i, f, z, o, each D wide):
//   x_c = SiLU(conv4(u));  wx_i, wx_f = HW(x_c, W_i), HW(x_c, W_f);  wx_z, wx_o = HW(u, ...)
//   raw_g,t = wx_g,t + R_g h_{t-1} + b_g     R_g block-diagonal per head [NH, DHs, DHs]
//   m_t = max(i~, logsigmoid(f~) + m_{t-1}) (m_0 = i~_0);  i' = exp(i~ - m_t)
//   f' = exp(logsigmoid(f~) + m_{t-1} - m_t);  c_t = f' c_{t-1} + i' tanh(z~)
//   n_t = f' n_{t-1} + i';  h_t = sigmoid(o~) c_t / n_t         (h_{-1} = c_{-1} = n_{-1} = 0)
// FFN (gated GeLU, tanh approximation): [g | a] = u Wup^T [2 Dff, D]; out = (GeLU(g) * a)
// Wdown^T [D, Dff]; no biases.
//
// Headwise HW(x, W): W [nb, 4, 4] for mLSTM (nb = Di / 4), [NH, DHs, DHs] for each sLSTM gate;
// y[blk * bo + o] = sum_i W[blk, o, i] x[blk * bi + i].
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace resident::reference {

inline constexpr double kXlstmNormEps = 1e-5;

struct XlstmDims {
  std::size_t window = 5;       // L >= 1
  std::size_t features = 3;     // F >= 1
  std::size_t outputs = 2;      // >= 1
  std::size_t d_model = 8;      // D, a multiple of heads
  std::size_t heads = 2;        // NH
  std::size_t inner = 16;       // Di, a multiple of 4 and of heads
  std::size_t ffn = 12;         // Dff, the FFN's hidden width
  std::size_t blocks = 2;       // >= 1
  long slstm_at = 1;            // the sLSTM block's index, -1 for none
  std::size_t conv_kernel = 4;  // K
  double cell_eps = 1e-6;       // the mLSTM cell's eps (0 allowed: n_t >= exp(-m_t) > 0)
  // Negative control of the gradient check only: the mLSTM backward takes dlogsigmoid(f~_j) =
  // dF_j instead of the reverse cumulative sum. Never set for a real backward.
  bool control_skip_forget_cumsum = false;

  std::size_t mlstm_head_dim() const { return inner / heads; }
  std::size_t slstm_head_dim() const { return d_model / heads; }
};

inline constexpr std::size_t kXlstmQkvBlock = 4;

// Throws resident::Error naming the field when `dims` is out of the ranges above.
void validate_xlstm_dims(const XlstmDims& dims);

// Named tensors in slab order with their shapes:
//   embed.weight [D, F], embed.bias [D]
//   mLSTM block b ("block<b>."): norm.weight [D], up.weight [2Di, D], conv.weight [Di, K],
//     conv.bias [Di], q.weight, k.weight, v.weight [Di/4, 4, 4], gate.weight [2NH, 3Di],
//     gate.bias [2NH], outnorm.weight [Di], skip [Di], down.weight [D, Di]
//   sLSTM block: norm.weight [D], conv.weight [D, K], conv.bias [D], w.weight [4, NH, DHs, DHs]
//     (gates i, f, z, o), r.weight [4, NH, DHs, DHs], bias [4, D], outnorm.weight [D],
//     ffn_norm.weight [D], ffn_up.weight [2 Dff, D], ffn_down.weight [D, Dff]
//   post_norm.weight [D], readout.weight [outputs, D], readout.bias [outputs]
struct XlstmTensorShape {
  std::string name;
  std::vector<std::size_t> shape;
};
std::vector<XlstmTensorShape> xlstm_tensor_shapes(const XlstmDims& dims);

// Every tensor of xlstm_tensor_shapes, by name, in that order.
struct XlstmParams {
  std::vector<std::pair<std::string, std::vector<double>>> tensors;
  std::vector<double>& at(const std::string& name);
  const std::vector<double>& at(const std::string& name) const;
};
XlstmParams xlstm_zero_params(const XlstmDims& dims);

// x [batch, L, F]; returns pred [batch, outputs].
std::vector<double> xlstm_forward(const XlstmDims& dims, const XlstmParams& params,
                                  std::span<const double> x, std::size_t batch);

struct XlstmGradients {
  XlstmParams params;      // dLoss/dparams, every tensor (overwritten)
  std::vector<double> dx;  // dLoss/dx [batch, L, F]
};

// The vector-Jacobian product of xlstm_forward at (params, x) for dpred [batch, outputs]: the
// mLSTM cell's backward treats m as a constant (exact at cell_eps = 0, where h does not depend on
// m), the sLSTM's is a reverse-time loop.
XlstmGradients xlstm_backward(const XlstmDims& dims, const XlstmParams& params,
                              std::span<const double> x, std::size_t batch,
                              std::span<const double> dpred);

// One mLSTM head over a sequence: q, k, v [L, DH] row-major, igate, fgate [L] pre-activations;
// returns h [L, DH]. The stabilized parallel form above, exactly as the model uses it.
std::vector<double> mlstm_cell_parallel(std::size_t L, std::size_t DH, std::span<const double> q,
                                        std::span<const double> k, std::span<const double> v,
                                        std::span<const double> igate,
                                        std::span<const double> fgate, double eps);

// The same cell without the stabilizer (m = 0): D = exp(logD), n_t = max(|r_t|, 1). The same h
// as the stabilized form while no exp overflows; inf / NaN once exp(i~) does.
std::vector<double> mlstm_cell_naive(std::size_t L, std::size_t DH, std::span<const double> q,
                                     std::span<const double> k, std::span<const double> v,
                                     std::span<const double> igate, std::span<const double> fgate,
                                     double eps);

// The spec's recurrent form (C_t, n_t, m_t carried step by step, m_{-1} = -inf): the same h as
// the parallel form.
std::vector<double> mlstm_cell_recurrent(std::size_t L, std::size_t DH, std::span<const double> q,
                                         std::span<const double> k, std::span<const double> v,
                                         std::span<const double> igate,
                                         std::span<const double> fgate, double eps);

}  // namespace resident::reference
