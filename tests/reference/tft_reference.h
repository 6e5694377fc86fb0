// Plain C++ double-precision forward and backward of the Temporal Fusion Transformer supervised
// model (MODELS.md section 3; Lim et al. 2021, pytorch-forecasting's module layout) with its
// quantile head: the oracle of the GPU model (lib/models/tft). Written for clarity, not speed; the
// backward is checked against central finite differences (tests/models/tft/
// tft_reference_test.cpp). No static covariates (so no context vectors, zero initial LSTM state),
// dropout 0, one LSTM layer; every one of the L steps is an encoder step and the query is the
// last step.
//
// Building blocks (row vectors; Linear(a) = a W^T + b with W [out, in]):
//   ELU(z)       = z for z > 0, e^z - 1 otherwise
//   GLU_W(a)     = (a Wa^T + ba) * sigmoid(a Wb^T + bb), the "glu" Linear [2 out, in] holding the
//                  value rows first, then the gate rows
//   GAN(a, r)    = LayerNorm(r + GLU(a))                        (gate, add, norm)
//   GRN(a)       = GAN(fc2(ELU(fc1(a))), skip(a)), fc1 [Hh, in], fc2 [Hh, Hh], glu [2 out, Hh];
//                  skip(a) = a when in == out, else the Linear "skip" [out, in]
//   LayerNorm    = (r - mean) / sqrt(biased variance + 1e-5) * gamma + beta, over the row
//
// Model, for one window x [L, F] (time-major, x[t * F + j]), H hidden, nh heads, dk = dv = H / nh,
// dc the prescaler width, O = outputs, K = quantiles:
//   1. prescalers:  e[t, j] = w_j x[t, j] + b_j in R^dc                   (w, b [F, dc])
//   2. variable selection:
//        s_t  = GRN_flat(e[t, 0] | ... | e[t, F-1])   (in F dc, hidden H, out F, skip Linear)
//        v_t  = softmax(s_t)                                                in R^F
//        xi_t = sum_j v_t[j] GRN_j(e[t, j])           (GRN_j: in dc, hidden H, out H, skip Linear;
//                                                      own weights per variable)
//   3. LSTM (gates i, f, g, o, row blocks of the [4H, H] weights in that order; h_{-1} = c_{-1} =
//      0): z = xi_t Wih^T + h_{t-1} Whh^T + b; i, f, o = sigmoid, g = tanh;
//      c_t = f c_{t-1} + i g;  h_t = o tanh(c_t)
//   4. phi_t   = GAN_lstm(h_t, xi_t)
//   5. theta_t = GRN_enrich(phi_t)                   (in = hidden = out = H, skip the identity)
//   6. interpretable attention, query q = theta_{L-1} Wq^T + bq [H], keys K_t = theta_t Wk^T + bk,
//      one value V_t = theta_t Wv^T + bv [dv] shared by the heads; per head h (columns
//      h dk .. h dk + dk - 1 of q and K):
//        A_h[t] = softmax over the visible steps of q_h . K_{t,h} / sqrt(dk),
//      visible = the causal mask t <= the query's step (L - 1: every step);
//        attn = (sum_t mean_h(A_h[t]) V_t) Wo^T      (Wo [H, dv], no bias)
//   7. delta = GAN_attn(attn, theta_{L-1});  psi = GRN_ff(delta)  (H -> H -> H)
//   8. u = GAN_out(psi, phi_{L-1});  prediction = u Whead^T + bhead   [O K], quantile fastest
// Loss (the trainer's, for these predictions): pinball over the quantile levels, mean over
// rows * O * K (nn_reference.h, pinball_loss).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace resident::reference {

inline constexpr double kTftNormEps = 1e-5;  // every LayerNorm's epsilon

struct TftDims {
  std::size_t window = 4;    // L >= 1
  std::size_t features = 3;  // F >= 1
  std::size_t hidden = 8;    // H >= 1, a multiple of heads
  std::size_t heads = 2;     // nh >= 1
  std::size_t prescale = 2;  // dc >= 1
  std::size_t outputs = 1;   // O >= 1 (horizon * target columns)
  std::size_t quantiles = 3; // K >= 1
  std::size_t head_width() const { return hidden / heads; }
  std::size_t predictions() const { return outputs * quantiles; }
};

// Throws resident::Error naming the field when `dims` is out of the ranges above.
void validate_tft_dims(const TftDims& dims);

// One named parameter tensor.
struct TftTensor {
  std::string name;
  std::vector<std::size_t> shape;
  std::vector<double> values;
};

// Every tensor, zero, in the slab's order. A GRN "<p>" has "<p>.fc1.weight" [Hh, in],
// "<p>.fc1.bias", "<p>.fc2.weight" [Hh, Hh], "<p>.fc2.bias", "<p>.glu.weight" [2 out, Hh],
// "<p>.glu.bias", "<p>.norm.gamma" [out], "<p>.norm.beta" and, when in != out, "<p>.skip.weight"
// [out, in], "<p>.skip.bias"; a gate "<p>" has "<p>.glu.weight" [2H, H], "<p>.glu.bias",
// "<p>.norm.gamma" [H], "<p>.norm.beta". In order: "prescale.weight" [F, dc], "prescale.bias"
// [F, dc]; GRN "vsn_flat"; the per-variable GRNs "vsn_var" with a leading [F] on every shape;
// "lstm.input_weight" [4H, H], "lstm.recurrent_weight" [4H, H], "lstm.bias" [4H]; gate
// "lstm_gate"; GRN "enrich"; "attn.query.weight" [H, H], "attn.query.bias" [H], "attn.key.weight"
// [H, H], "attn.key.bias" [H], "attn.value.weight" [dv, H], "attn.value.bias" [dv],
// "attn.out.weight" [H, dv]; gate "attn_gate"; GRN "ff"; gate "out_gate"; "head.weight" [O K, H],
// "head.bias" [O K].
std::vector<TftTensor> tft_zero_params(const TftDims& dims);

// What a forward exposes besides the prediction (for the tests' checks of the parts).
struct TftForwardDetail {
  std::vector<double> selection;  // v [batch, L, F]
  std::vector<double> attention;  // mean_h A_h [batch, L]
};

// x [batch, L, F]; returns the predictions [batch, O K].
std::vector<double> tft_forward(const TftDims& dims, const std::vector<TftTensor>& params,
                                std::span<const double> x, std::size_t batch,
                                TftForwardDetail* detail = nullptr);

// dLoss/dparams (same tensors as params, overwritten) of tft_forward at (params, x) for
// dprediction [batch, O K]. The input gradient is not formed (the input is data).
std::vector<TftTensor> tft_backward(const TftDims& dims, const std::vector<TftTensor>& params,
                                    std::span<const double> x, std::size_t batch,
                                    std::span<const double> dprediction);

}  // namespace resident::reference
