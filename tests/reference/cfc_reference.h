// Plain C++ double-precision forward and backward of the Liquid CfC supervised model (MODELS.md
// section 5, ncps' CfCCell with a one-layer backbone): the oracle of the GPU model
// (lib/models/cfc) and of its kernels. Written for clarity, not speed; the backward is checked
// against central finite differences (tests/models/cfc/cfc_reference_test.cpp).
//
// Model, for one window x [L, F] (time-major, x[t * F + f]), h_{-1} = 0, for t = 0..L-1:
//   ts_t = x[t * F + time_column] when time_column >= 0, else 1      (elapsed time of step t)
//   p    = Wu x_t + Wh h_{t-1} + b_bb                    backbone: [U, F], [U, H], [U]
//   z    = 1.7159 tanh(0.666 p)                          LeCun tanh
//   g    = Wheads z + b_heads                            [nh * H, U], [nh * H]
//   default (nh = 4; g's row blocks ff1, ff2, time_a, time_b, each H rows):
//     f1 = tanh(g_ff1), f2 = tanh(g_ff2), s = sigmoid(g_ta * ts + g_tb)
//     h_t = f1 (1 - s) + s f2
//   pure (nh = 1; g = f):
//     h_t = -A exp(-ts (|w_tau| + |f|)) f + A            A, w_tau [H]
//   pred = Wo h_{L-1} + bo                               readout [outputs, H], [outputs]
// The input u_t of the backbone is every column of x_t (the elapsed-time column included).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace resident::reference {

inline constexpr double kCfcLecunScale = 1.7159;
inline constexpr double kCfcLecunSlope = 0.666;

struct CfcDims {
  std::size_t window = 4;    // L >= 1
  std::size_t features = 3;  // F >= 1
  std::size_t outputs = 2;   // >= 1
  std::size_t hidden = 5;    // H >= 1
  std::size_t units = 6;     // U, backbone width >= 1
  bool pure = false;         // the "pure" cell instead of "default"
  long time_column = -1;     // -1 (ts = 1) or [0, F): the column holding the elapsed time

  std::size_t heads() const { return pure ? 1 : 4; }
};

struct CfcParams {
  std::vector<double> input_weight;      // Wu [U, F]
  std::vector<double> recurrent_weight;  // Wh [U, H]
  std::vector<double> backbone_bias;     // b_bb [U]
  std::vector<double> heads_weight;      // Wheads [nh * H, U]
  std::vector<double> heads_bias;        // b_heads [nh * H]
  std::vector<double> w_tau;             // [H], pure only (empty otherwise)
  std::vector<double> A;                 // [H], pure only (empty otherwise)
  std::vector<double> readout_weight;    // Wo [outputs, H]
  std::vector<double> readout_bias;      // bo [outputs]
};

// Throws resident::Error naming the field when `dims` is out of the ranges above.
void validate_cfc_dims(const CfcDims& dims);

// Every tensor of `dims`' shapes, zero.
CfcParams cfc_zero_params(const CfcDims& dims);

// The tensors by their slab names, in the slab's order: "backbone.input_weight",
// "backbone.recurrent_weight", "backbone.bias", "heads.weight", "heads.bias", ("w_tau", "A" in
// pure mode), "readout.weight", "readout.bias".
std::vector<std::pair<std::string, std::vector<double>*>> cfc_named_tensors(CfcParams& params);

// x [batch, L, F]; returns pred [batch, outputs].
std::vector<double> cfc_forward(const CfcDims& dims, const CfcParams& params,
                                std::span<const double> x, std::size_t batch);

struct CfcGradients {
  CfcParams params;        // dLoss/dparams, every tensor (overwritten)
  std::vector<double> dx;  // dLoss/dx [batch, L, F]; the elapsed-time column's includes ts's path
};

// The vector-Jacobian product of cfc_forward at (params, x) for dpred [batch, outputs], by
// reverse-time BPTT.
CfcGradients cfc_backward(const CfcDims& dims, const CfcParams& params, std::span<const double> x,
                          std::size_t batch, std::span<const double> dpred);

}  // namespace resident::reference
