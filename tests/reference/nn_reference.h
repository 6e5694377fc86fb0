// Plain C++ double-precision forward and backward of every op of the nn kit: the
// oracles of the GPU nn tests. Written for clarity, not speed; each backward is checked against
// central finite differences (tests/nn/reference_gradcheck_test.cpp).
//
// Conventions
//   - Tensors are flat, row-major std::span<const double>; shapes are passed explicitly and every
//     span's size is checked against them (a mismatch throws resident::Error).
//   - A forward returns its output as a new vector.
//   - A backward takes what it needs of the forward's inputs and the upstream gradient dy (the
//     shape of the forward's output) and writes the vector-Jacobian product into caller-owned
//     spans, each element once, as `mode` says: GradMode::Overwrite replaces the span's contents
//     (and never reads them), GradMode::Accumulate adds into them. A gradient span that is passed
//     empty is not computed.
//   - Rows are independent unless an op says otherwise ("over rows" = one row at a time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace resident::reference {

// How a backward writes a gradient into its output span.
enum class GradMode {
  Overwrite,   // out = gradient
  Accumulate,  // out += gradient
};

// ---------------------------------------------------------------------------------------------
// Linear: y = x W^T + b.

struct LinearShape {
  std::size_t batch = 0;         // rows of x and y
  std::size_t in_features = 0;   // columns of x and W
  std::size_t out_features = 0;  // columns of y, rows of W
};

// x [batch, in], weight [out, in], bias [out] or empty (no bias). Returns y [batch, out].
std::vector<double> linear_forward(const LinearShape& shape, std::span<const double> x,
                                   std::span<const double> weight, std::span<const double> bias);

struct LinearGrads {
  std::span<double> dx;       // [batch, in]: dy W
  std::span<double> dweight;  // [out, in]:   dy^T x
  std::span<double> dbias;    // [out]:       column sums of dy (leave empty without a bias)
};

// x [batch, in], weight [out, in], dy [batch, out].
void linear_backward(const LinearShape& shape, std::span<const double> x,
                     std::span<const double> weight, std::span<const double> dy,
                     const LinearGrads& grads, GradMode mode);

// ---------------------------------------------------------------------------------------------
// Elementwise activations: y has the shape of x; the backward takes x, dy and writes dx.

std::vector<double> relu_forward(std::span<const double> x);  // max(x, 0); relu'(0) = 0
void relu_backward(std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                   GradMode mode);

std::vector<double> tanh_forward(std::span<const double> x);
void tanh_backward(std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                   GradMode mode);

std::vector<double> sigmoid_forward(std::span<const double> x);  // 1 / (1 + e^-x)
void sigmoid_backward(std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                      GradMode mode);

std::vector<double> silu_forward(std::span<const double> x);  // x * sigmoid(x)
void silu_backward(std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                   GradMode mode);

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
std::vector<double> gelu_tanh_forward(std::span<const double> x);
void gelu_tanh_backward(std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                        GradMode mode);

// ELU: x for x > 0, alpha (e^x - 1) otherwise.
std::vector<double> elu_forward(std::span<const double> x, double alpha);
void elu_backward(std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                  double alpha, GradMode mode);

// Softplus (PyTorch semantics): log(1 + e^(beta x)) / beta, and x itself where beta x > threshold.
// beta > 0.
std::vector<double> softplus_forward(std::span<const double> x, double beta, double threshold);
void softplus_backward(std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                       double beta, double threshold, GradMode mode);

// One activation chosen at run time (the MLP's per-layer activation).
enum class ActivationKind { Identity, Relu, Tanh, Sigmoid, Silu, GeluTanh, Elu, Softplus };

struct Activation {
  ActivationKind kind = ActivationKind::Identity;
  double elu_alpha = 1.0;            // Elu only
  double softplus_beta = 1.0;        // Softplus only
  double softplus_threshold = 20.0;  // Softplus only
};

std::vector<double> activation_forward(const Activation& activation, std::span<const double> x);
void activation_backward(const Activation& activation, std::span<const double> x,
                         std::span<const double> dy, std::span<double> dx, GradMode mode);

// ---------------------------------------------------------------------------------------------
// GLU over the last dimension: x [rows, 2 * half] = [a | b] per row, y [rows, half] = a *
// sigmoid(b).

std::vector<double> glu_forward(std::size_t rows, std::size_t half, std::span<const double> x);
// dy [rows, half]; dx [rows, 2 * half].
void glu_backward(std::size_t rows, std::size_t half, std::span<const double> x,
                  std::span<const double> dy, std::span<double> dx, GradMode mode);

// ---------------------------------------------------------------------------------------------
// Dropout with an explicit mask: y = x * keep_mask / keep_probability. keep_mask has the shape
// of x, 1 = kept, 0 = dropped (on the GPU it comes from Philox); keep_probability in (0, 1].

std::vector<double> dropout_forward(std::span<const double> x,
                                    std::span<const std::uint8_t> keep_mask,
                                    double keep_probability);
void dropout_backward(std::span<const std::uint8_t> keep_mask, double keep_probability,
                      std::span<const double> dy, std::span<double> dx, GradMode mode);

// ---------------------------------------------------------------------------------------------
// Normalizations over the last dimension: x, y [rows, cols] with cols > 0; gamma, beta [cols];
// eps > 0.

// LayerNorm: y = (x - mean) / sqrt(var + eps) * gamma + beta, mean and biased variance (1/cols)
// over each row.
std::vector<double> layer_norm_forward(std::size_t rows, std::size_t cols,
                                       std::span<const double> x, std::span<const double> gamma,
                                       std::span<const double> beta, double eps);

struct LayerNormGrads {
  std::span<double> dx;      // [rows, cols]
  std::span<double> dgamma;  // [cols], summed over rows
  std::span<double> dbeta;   // [cols], summed over rows
};

void layer_norm_backward(std::size_t rows, std::size_t cols, std::span<const double> x,
                         std::span<const double> gamma, std::span<const double> dy, double eps,
                         const LayerNormGrads& grads, GradMode mode);

// RMSNorm: y = x / sqrt(mean(x^2) + eps) * gamma, the mean over each row.
std::vector<double> rms_norm_forward(std::size_t rows, std::size_t cols, std::span<const double> x,
                                     std::span<const double> gamma, double eps);

struct RmsNormGrads {
  std::span<double> dx;      // [rows, cols]
  std::span<double> dgamma;  // [cols], summed over rows
};

void rms_norm_backward(std::size_t rows, std::size_t cols, std::span<const double> x,
                       std::span<const double> gamma, std::span<const double> dy, double eps,
                       const RmsNormGrads& grads, GradMode mode);

// ---------------------------------------------------------------------------------------------
// Softmax and log-softmax over rows: x, y [rows, cols].
//
// SoftmaxMask::Causal reads x as a stack of [T, T] score matrices with T = cols (rows must be a
// multiple of cols): row r sees columns c <= r % T. Masked outputs are exactly 0 (softmax) or
// -infinity (log-softmax); masked inputs are never read and get a gradient of exactly 0.

enum class SoftmaxMask { None, Causal };

std::vector<double> softmax_forward(std::size_t rows, std::size_t cols, std::span<const double> x,
                                    SoftmaxMask mask);
void softmax_backward(std::size_t rows, std::size_t cols, std::span<const double> x,
                      std::span<const double> dy, SoftmaxMask mask, std::span<double> dx,
                      GradMode mode);

std::vector<double> log_softmax_forward(std::size_t rows, std::size_t cols,
                                        std::span<const double> x, SoftmaxMask mask);
// dy at masked positions is ignored (the output there is a constant -infinity).
void log_softmax_backward(std::size_t rows, std::size_t cols, std::span<const double> x,
                          std::span<const double> dy, SoftmaxMask mask, std::span<double> dx,
                          GradMode mode);

// ---------------------------------------------------------------------------------------------
// MLP: a list of Linear layers, each followed by its activation.
//
// Parameters live in one flat vector (the slab), layer by layer: weight [out, in], then bias
// [out] when the layer has one. Consecutive layers must chain (out of one = in of the next).

struct MlpLayer {
  std::size_t in_features = 0;
  std::size_t out_features = 0;
  bool bias = true;
  Activation activation;
};

std::size_t mlp_parameter_count(std::span<const MlpLayer> layers);

// x [batch, layers.front().in_features]; returns y [batch, layers.back().out_features].
std::vector<double> mlp_forward(std::span<const MlpLayer> layers, std::size_t batch,
                                std::span<const double> params, std::span<const double> x);

struct MlpGrads {
  std::span<double> dx;       // [batch, in of the first layer]
  std::span<double> dparams;  // [mlp_parameter_count(layers)], laid out as params
};

void mlp_backward(std::span<const MlpLayer> layers, std::size_t batch,
                  std::span<const double> params, std::span<const double> x,
                  std::span<const double> dy, const MlpGrads& grads, GradMode mode);

// ---------------------------------------------------------------------------------------------
// Losses: a scalar. The backward writes d_loss * dL/dprediction (d_loss = 1 at the end of the
// chain).

// MSE: mean over all n elements of (prediction - target)^2. prediction, target [n].
double mse_loss(std::span<const double> prediction, std::span<const double> target);
void mse_loss_backward(std::span<const double> prediction, std::span<const double> target,
                       double d_loss, std::span<double> d_prediction, GradMode mode);

// Huber with per-sample weights (PER importance weights):
//   L = 1 / (rows * cols) * sum_r weight_r * sum_c h(prediction_rc - target_rc),
//   h(d) = d^2 / 2 for |d| <= delta, delta (|d| - delta / 2) beyond; delta > 0.
// prediction, target [rows, cols]; sample_weights [rows], or empty for weight 1.
double huber_loss(std::size_t rows, std::size_t cols, std::span<const double> prediction,
                  std::span<const double> target, std::span<const double> sample_weights,
                  double delta);
void huber_loss_backward(std::size_t rows, std::size_t cols, std::span<const double> prediction,
                         std::span<const double> target, std::span<const double> sample_weights,
                         double delta, double d_loss, std::span<double> d_prediction,
                         GradMode mode);

// Pinball (quantile) loss: column k of prediction estimates quantile taus[k] of the row's target.
//   L = 1 / (rows * K) * sum_{r,k} rho_{tau_k}(target_r - prediction_rk),
//   rho_tau(u) = tau u for u >= 0, (tau - 1) u for u < 0; each tau in (0, 1).
// prediction [rows, K], target [rows], taus [K].
double pinball_loss(std::size_t rows, std::span<const double> prediction,
                    std::span<const double> target, std::span<const double> taus);
void pinball_loss_backward(std::size_t rows, std::span<const double> prediction,
                           std::span<const double> target, std::span<const double> taus,
                           double d_loss, std::span<double> d_prediction, GradMode mode);

// Categorical distribution from logits [rows, cols] (PPO's policy head).
// log_prob[r] = log softmax(logits_r)[actions[r]]; actions [rows], each in [0, cols).
std::vector<double> categorical_log_prob(std::size_t rows, std::size_t cols,
                                         std::span<const double> logits,
                                         std::span<const std::int32_t> actions);
// d_log_prob [rows]; d_logits [rows, cols].
void categorical_log_prob_backward(std::size_t rows, std::size_t cols,
                                   std::span<const double> logits,
                                   std::span<const std::int32_t> actions,
                                   std::span<const double> d_log_prob, std::span<double> d_logits,
                                   GradMode mode);

// entropy[r] = -sum_c p_rc log p_rc with p_r = softmax(logits_r); returns [rows].
std::vector<double> categorical_entropy(std::size_t rows, std::size_t cols,
                                        std::span<const double> logits);
// d_entropy [rows]; d_logits [rows, cols].
void categorical_entropy_backward(std::size_t rows, std::size_t cols,
                                  std::span<const double> logits, std::span<const double> d_entropy,
                                  std::span<double> d_logits, GradMode mode);

// ---------------------------------------------------------------------------------------------
// Optimizer and clipping over a flat parameter vector (the slab).

struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

// One AdamW step (Loshchilov & Hutter; PyTorch's torch.optim.AdamW), for every element i:
//   p <- p * (1 - lr * weight_decay * decay_mask[i])      decoupled decay, from the old p
//   m <- beta1 m + (1 - beta1) g;   v <- beta2 v + (1 - beta2) g^2
//   p <- p - lr * (m / (1 - beta1^step)) / (sqrt(v / (1 - beta2^step)) + eps)
// step is this update's count, starting at 1. params, grads, m, v, decay_mask (1 = decayed,
// 0 = not) all have the same size; m and v start at 0 and are updated in place.
void adamw_step(const AdamWConfig& config, std::uint64_t step, std::span<double> params,
                std::span<const double> grads, std::span<double> m, std::span<double> v,
                std::span<const std::uint8_t> decay_mask);

// sqrt(sum g^2) over the whole vector.
double global_norm(std::span<const double> grads);

// Scales grads in place so that their global norm is at most max_norm (> 0), and returns the
// scale applied: max_norm / norm when norm > max_norm, else 1 (grads unchanged).
double clip_global_norm(std::span<double> grads, double max_norm);

// ---------------------------------------------------------------------------------------------
// Initializers. Each fills `out` from `rng`, in element order (same seed, same values).
// A weight is [out_features, in_features] (fan_in = in, fan_out = out).

void init_uniform(std::span<double> out, double low, double high, std::mt19937_64& rng);
void init_normal(std::span<double> out, double mean, double stddev, std::mt19937_64& rng);

// Glorot & Bengio: uniform bound gain * sqrt(6 / (fan_in + fan_out)); normal std
// gain * sqrt(2 / (fan_in + fan_out)). Variance gain^2 * 2 / (fan_in + fan_out) either way.
void init_xavier_uniform(std::span<double> weight, std::size_t out_features,
                         std::size_t in_features, double gain, std::mt19937_64& rng);
void init_xavier_normal(std::span<double> weight, std::size_t out_features, std::size_t in_features,
                        double gain, std::mt19937_64& rng);

// He et al., fan-in mode: uniform bound gain * sqrt(3 / fan_in); normal std gain / sqrt(fan_in).
// Variance gain^2 / fan_in either way; gain = sqrt(2) for ReLU.
void init_kaiming_uniform(std::span<double> weight, std::size_t out_features,
                          std::size_t in_features, double gain, std::mt19937_64& rng);
void init_kaiming_normal(std::span<double> weight, std::size_t out_features,
                         std::size_t in_features, double gain, std::mt19937_64& rng);

// Orthogonal (Saxe et al.): gain * Q, Q from the QR decomposition (modified Gram-Schmidt, twice)
// of a standard normal matrix, R's diagonal positive, so Q is Haar distributed. For rows >= cols
// the columns are orthonormal (Q^T Q = I); for rows < cols the rows are (Q Q^T = I).
void init_orthogonal(std::span<double> weight, std::size_t rows, std::size_t cols, double gain,
                     std::mt19937_64& rng);

}  // namespace resident::reference
