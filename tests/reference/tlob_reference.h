// Plain C++ double-precision forward and backward of the TLOB supervised model (MODELS.md section
// 7, the dual-attention transformer of Berti & Kasneci 2025), its cross-entropy loss, and the
// classification the trainer brings with it (trend labels, accuracy, macro F1): the oracles of
// the GPU model (lib/models/tlob), of its kernels and of the classification kernels
// (kernels/data/trend_labels.h, cross_entropy_loss.h, class_confusion.h). Written for clarity, not
// speed; the backward is checked against central finite differences
// (tests/models/tlob/tlob_reference_test.cpp).
//
// Model, for one window x [L, F] (time-major, x[t * F + f]):
//   1. BiN: temporal z-score per feature f (mean m2_f and unbiased std s2_f over t) and feature
//      z-score per step t (mean m1_t and unbiased std s1_t over f); a std below 1e-4 counts as 1
//      (both z-scores, as the authors' bin.py):
//        X1[t, f] = l1[t] (x[t, f] - m1_t) / s1_t + b1[t]
//        X2[t, f] = l2[f] (x[t, f] - m2_f) / s2_f + b2[f]
//        xb = y1 X1 + y2 X2                                       (y1, y2 learned scalars)
//   2. e [L, H] = xb We^T + be + pos,  pos[t, 2i] = sin(t / 10000^(2i / H)),
//      pos[t, 2i + 1] = cos(t / 10000^(2i / H))  (fixed).
//   3. 2 * pairs layers k = 0, 1, ...: layer k has tokens T_k, width d_k, output width o_k;
//      even k (temporal): d = H, T = L; odd k (feature): d = L, T = the previous layer's o;
//      o = d except in the last pair, where o = d / 4. For the input X [T, d]:
//        [Q | K | V] = X Wqkv^T + bqkv                            Wqkv [3 d nh, d]
//        per head h (columns h d .. h d + d - 1 of Q, K, V):
//          P_h = softmax_rows(Q_h K_h^T / sqrt(d)),  A_h = P_h V_h   (no mask)
//        R = A Wo^T + bo + X                                      Wo [d, d nh]
//        Y = LayerNorm(R) (eps 1e-5, biased variance, gamma, beta)
//        M = gelu(Y W1^T + b1) W2^T + b2                          W1 [4d, d], W2 [o, 4d]
//        out = M + X when o == d, else M
//      and the next layer's input is out^T [o, T]. The last layer's out [H/4, L/4] is flattened
//      row-major ((H/4)(L/4) values) without that transpose.
//   4. head: widths w_0 = (H/4)(L/4), w_{j+1} = w_j / 4 while w_j > head_limit; Linears between
//      them with gelu after each, then a Linear w_last -> classes: the logits.
// gelu is the tanh form 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))).
// Loss: cross-entropy, mean over the batch of logsumexp(z) - z[label].
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace resident::reference {

inline constexpr double kTlobStdFloor = 1e-4;   // a BiN std below this counts as 1
inline constexpr double kTlobNormEps = 1e-5;    // LayerNorm epsilon

struct TlobDims {
  std::size_t window = 8;       // L >= 4, a multiple of 4
  std::size_t features = 3;     // F >= 2
  std::size_t hidden = 8;       // H >= 4, a multiple of 4
  std::size_t pairs = 2;        // temporal + feature layer pairs >= 1
  std::size_t heads = 1;        // nh >= 1
  std::size_t classes = 3;      // >= 2
  std::size_t head_limit = 128; // the head divides its width by 4 while it exceeds this, >= 1

  std::size_t layers() const { return 2 * pairs; }
  bool temporal(std::size_t k) const { return k % 2 == 0; }
  std::size_t width(std::size_t k) const { return temporal(k) ? hidden : window; }
  std::size_t out_width(std::size_t k) const {
    return k / 2 + 1 == pairs ? width(k) / 4 : width(k);
  }
  std::size_t tokens(std::size_t k) const {
    return temporal(k) ? window : out_width(k - 1);
  }
  // [w_0, w_1, ..., w_last, classes].
  std::vector<std::size_t> head_widths() const;
};

// Throws resident::Error naming the field when `dims` is out of the ranges above.
void validate_tlob_dims(const TlobDims& dims);

// One named parameter tensor.
struct TlobTensor {
  std::string name;
  std::vector<std::size_t> shape;
  std::vector<double> values;
};

// Every tensor, zero, in the slab's order: "bin.l1" [L], "bin.b1" [L], "bin.l2" [F], "bin.b2" [F],
// "bin.y1" [1], "bin.y2" [1], "embed.weight" [H, F], "embed.bias" [H]; per layer k
// "layer<k>.qkv.weight" [3 d nh, d], "layer<k>.qkv.bias", "layer<k>.out.weight" [d, d nh],
// "layer<k>.out.bias", "layer<k>.norm.gamma" [d], "layer<k>.norm.beta", "layer<k>.fc1.weight"
// [4d, d], "layer<k>.fc1.bias", "layer<k>.fc2.weight" [o, 4d], "layer<k>.fc2.bias"; per head layer
// j "head<j>.weight" [w_{j+1}, w_j], "head<j>.bias".
std::vector<TlobTensor> tlob_zero_params(const TlobDims& dims);

// The fixed positional embedding pos [L, H] of step 2.
std::vector<double> tlob_positional_embedding(std::size_t window, std::size_t hidden);

// x [batch, L, F]; returns the logits [batch, classes].
std::vector<double> tlob_forward(const TlobDims& dims, const std::vector<TlobTensor>& params,
                                 std::span<const double> x, std::size_t batch);

// dLoss/dparams (same tensors as params, overwritten) of tlob_forward at (params, x) for
// dlogits [batch, classes]. The input gradient is not formed (the input is data).
std::vector<TlobTensor> tlob_backward(const TlobDims& dims, const std::vector<TlobTensor>& params,
                                      std::span<const double> x, std::size_t batch,
                                      std::span<const double> dlogits);

// ----- classification

// mean over rows of logsumexp(logits[r]) - logits[r, labels[r]]; logits [rows, classes].
double cross_entropy(std::span<const double> logits, std::span<const std::int32_t> labels,
                     std::size_t rows, std::size_t classes);
// d/dlogits of cross_entropy: (softmax(logits[r]) - onehot(labels[r])) / rows.
std::vector<double> cross_entropy_backward(std::span<const double> logits,
                                           std::span<const std::int32_t> labels, std::size_t rows,
                                           std::size_t classes);

// The smoothed trend of the window starting at row `start` of series [rows, columns] in column
// `column`: mean of the h rows start + L .. start + L + h - 1 minus the mean of the h rows
// start + L - h .. start + L - 1 (both sums in row order, then divided by h). h <= L.
double trend_change(std::span<const float> series, std::size_t columns, std::size_t column,
                    std::size_t start, std::size_t window, std::size_t horizon);
// 2 (up) when change > theta, 0 (down) when change < -theta, else 1 (stationary).
std::int32_t trend_label(double change, double theta);

// confusion [classes, classes] (row = label, column = argmax of the logits, the first maximum on
// ties), counted over rows.
std::vector<std::uint64_t> confusion_counts(std::span<const double> logits,
                                            std::span<const std::int32_t> labels,
                                            std::size_t rows, std::size_t classes);
struct ClassMetrics {
  double accuracy = 0.0;
  double macro_f1 = 0.0;  // mean over classes of 2 tp / (2 tp + fp + fn); a class with
                          // 2 tp + fp + fn == 0 scores 0
};
ClassMetrics class_metrics(std::span<const std::uint64_t> confusion, std::size_t classes);

}  // namespace resident::reference
