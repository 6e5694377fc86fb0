// Plain C++ double-precision forward and backward of the Mamba2 (SSD) supervised model: the
// oracle of the GPU model (lib/models/mamba2) and of its kernels. Written for clarity, not speed;
// every backward is checked against central finite differences (tests/models/mamba2).
//
// Model (MODELS.md section 1), for one window x [L, F] (time-major, x[t * F + f]):
//   h = x We^T + be                                            embed, Linear F -> D
//   per layer:  h = h + Mixer(RMSNorm(h) * norm_w)             pre-norm residual block
//   pred = RMSNorm(h[L-1]) * norm_f_w  Whead^T + bhead          head on the last time step
// Mixer (d_inner = expand * D = H * P, N = d_state, C = d_inner + 2N conv channels):
//   proj = u Win^T, split per row into z [d_inner], xBC [C], dt_raw [H]
//   xBC = SiLU(b_c + sum_k w[c, k] xBC_pre[t - K + 1 + k, c])  causal depthwise conv, zero past
//   x = xBC[0, d_inner) (head h: columns h*P .. h*P+P-1), B = xBC[d_inner, +N), C = next N
//   dt = softplus(dt_raw + dt_bias) (threshold 20), A = -exp(A_log), per head
//   y_h = SSD(x_h, dt_h, A_h, B, C) + D_h x_h
//   out = RMSNorm(y * SiLU(z)) * gnorm_w  Wout^T                gate before the norm
// Every RMSNorm: eps 1e-5.
//
// SSD of one head over one sequence, chunked (chunk Q; chunk >= L is the single-chunk form):
// a_t = dt_t A; within a chunk starting at t0, cs_t = sum_{r=t0..t} a_r and the segment sums
// seg(t, s) = sum_{r=s+1..t} a_r (s <= t) are accumulated directly (never as cs_t - cs_s), so
// every exponent argument is <= 0. With the state h_in [P, N] entering the chunk (0 for the
// first):
//   y_t = sum_{s<=t in chunk} (C_t . B_s) exp(seg(t, s)) dt_s x_s + exp(cs_t) h_in C_t
//   h_out = exp(cs_end) h_in + sum_s exp(seg(end, s)) dt_s x_s B_s^T
// which is the recurrence h_t = exp(a_t) h_{t-1} + dt_t x_t B_t^T, y_t = h_t C_t, exactly.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace resident::reference {

struct Mamba2Dims {
  std::size_t window = 5;     // L
  std::size_t features = 3;   // F
  std::size_t outputs = 1;
  std::size_t d_model = 8;    // D
  std::size_t n_layers = 2;
  std::size_t expand = 2;
  std::size_t headdim = 4;    // P
  std::size_t d_state = 3;    // N
  std::size_t d_conv = 4;     // K
  std::size_t chunk = 64;     // Q

  std::size_t d_inner() const { return expand * d_model; }
  std::size_t heads() const { return d_inner() / headdim; }
  std::size_t conv_channels() const { return d_inner() + 2 * d_state; }
  std::size_t proj_width() const { return 2 * d_inner() + 2 * d_state + heads(); }
};

inline constexpr double kMamba2NormEps = 1e-5;

struct Mamba2LayerParams {
  std::vector<double> norm_w;      // [D]
  std::vector<double> in_proj_w;   // [proj_width, D]
  std::vector<double> conv_w;      // [C, K]
  std::vector<double> conv_b;      // [C]
  std::vector<double> dt_bias;     // [H]
  std::vector<double> A_log;       // [H]
  std::vector<double> D;           // [H]
  std::vector<double> gnorm_w;     // [d_inner]
  std::vector<double> out_proj_w;  // [D, d_inner]
};

struct Mamba2Params {
  std::vector<double> embed_w;  // [D, F]
  std::vector<double> embed_b;  // [D]
  std::vector<Mamba2LayerParams> layers;
  std::vector<double> norm_f_w;  // [D]
  std::vector<double> head_w;    // [outputs, D]
  std::vector<double> head_b;    // [outputs]
};

// Every tensor of `dims`' shapes, zero.
Mamba2Params mamba2_zero_params(const Mamba2Dims& dims);

// The tensors by their slab names ("embed.weight", "layers.0.mixer.A_log", ...), in the slab's
// declaration order (lib/models/mamba2).
std::vector<std::pair<std::string, std::vector<double>*>> mamba2_named_tensors(Mamba2Params& p);

// Flat copy of all tensors in mamba2_named_tensors order, and back.
std::vector<double> mamba2_flatten(const Mamba2Params& p);
void mamba2_unflatten(std::span<const double> flat, Mamba2Params& p);

// predictions [batch, outputs] from x [batch, L, F].
std::vector<double> mamba2_forward(const Mamba2Dims& dims, const Mamba2Params& params,
                                   std::span<const double> x, std::size_t batch);

struct Mamba2Gradients {
  Mamba2Params params;    // dLoss/dparam, every tensor
  std::vector<double> dx;  // [batch, L, F]
};

// The gradient of <d_prediction, forward(x)> (d_prediction [batch, outputs]).
Mamba2Gradients mamba2_backward(const Mamba2Dims& dims, const Mamba2Params& params,
                                std::span<const double> x, std::size_t batch,
                                std::span<const double> d_prediction);

// ---------------------------------------------------------------------------------------------
// Building blocks (one head, one sequence unless said otherwise).

struct SsdShape {
  std::size_t length = 0;   // L
  std::size_t headdim = 0;  // P
  std::size_t d_state = 0;  // N
  std::size_t chunk = 0;    // Q >= 1
};

// Largest exponent argument any SSD call has formed since the last reset (every one is <= 0
// by construction; the tests assert it).
void ssd_reset_max_exponent();
double ssd_max_exponent();

// x [L, P], dt [L] (> 0), A (< 0), B, C [L, N], D: returns y [L, P] (D x included).
std::vector<double> ssd_forward(const SsdShape& shape, std::span<const double> x,
                                std::span<const double> dt, double A, std::span<const double> B,
                                std::span<const double> C, double D);

// The step() recurrence h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T, y_t = h_t C_t + D x_t: an
// independent form of the same map.
std::vector<double> ssd_recurrent_forward(const SsdShape& shape, std::span<const double> x,
                                          std::span<const double> dt, double A,
                                          std::span<const double> B, std::span<const double> C,
                                          double D);

struct SsdGrads {
  std::vector<double> dx;  // [L, P]
  std::vector<double> ddt;  // [L]
  double dA = 0.0;
  std::vector<double> dB;  // [L, N]
  std::vector<double> dC;  // [L, N]
  double dD = 0.0;
};

// Gradient of <dy, ssd_forward(...)>, dy [L, P].
SsdGrads ssd_backward(const SsdShape& shape, std::span<const double> x, std::span<const double> dt,
                      double A, std::span<const double> B, std::span<const double> C, double D,
                      std::span<const double> dy);

// Causal depthwise conv over u [batch, L, C] (rows of stride C), weight [C, K], bias [C]:
// y[b, t, c] = bias_c + sum_k w[c, k] u[b, t - K + 1 + k, c] (0 before t = 0), then SiLU when
// `silu`. Returns y [batch, L, C].
std::vector<double> causal_conv1d_forward(std::size_t batch, std::size_t length,
                                          std::size_t channels, std::size_t kernel,
                                          std::span<const double> u, std::span<const double> weight,
                                          std::span<const double> bias, bool silu);

struct CausalConv1dGrads {
  std::vector<double> du;       // [batch, L, C]
  std::vector<double> dweight;  // [C, K]
  std::vector<double> dbias;    // [C]
};
CausalConv1dGrads causal_conv1d_backward(std::size_t batch, std::size_t length,
                                         std::size_t channels, std::size_t kernel,
                                         std::span<const double> u, std::span<const double> weight,
                                         std::span<const double> bias, bool silu,
                                         std::span<const double> dy);

// Gated RMSNorm over rows [rows, cols]: yn = RMSNorm(y * SiLU(z)) * w (eps 1e-5).
std::vector<double> gated_rms_norm_forward(std::size_t rows, std::size_t cols,
                                           std::span<const double> y, std::span<const double> z,
                                           std::span<const double> w);
struct GatedRmsNormGrads {
  std::vector<double> dy, dz, dw;
};
GatedRmsNormGrads gated_rms_norm_backward(std::size_t rows, std::size_t cols,
                                          std::span<const double> y, std::span<const double> z,
                                          std::span<const double> w, std::span<const double> dyn);

}  // namespace resident::reference
