// Losses and their gradients: MSE, weighted Huber, pinball, categorical log-prob and entropy.
#include <cmath>
#include <string>

#include "tests/reference/nn_reference.h"
#include "tests/reference/nn_reference_checks.h"

namespace resident::reference {

using detail::require;
using detail::require_size;
using detail::require_size_or_empty;
using detail::write_grad;

namespace {

double huber(double d, double delta) {
  const double a = std::abs(d);
  return a <= delta ? 0.5 * d * d : delta * (a - 0.5 * delta);
}

double huber_derivative(double d, double delta) {
  if (d > delta) return delta;
  if (d < -delta) return -delta;
  return d;
}

void require_huber_args(const char* op, std::size_t rows, std::size_t cols,
                        std::span<const double> prediction, std::span<const double> target,
                        std::span<const double> sample_weights, double delta) {
  require(rows * cols > 0, op, "the loss of an empty batch is undefined");
  require_size(op, "prediction", prediction.size(), rows * cols);
  require_size(op, "target", target.size(), rows * cols);
  require_size_or_empty(op, "sample_weights", sample_weights.size(), rows);
  require(delta > 0.0, op, "delta = " + std::to_string(delta) + ", must be > 0");
}

double sample_weight(std::span<const double> sample_weights, std::size_t r) {
  return sample_weights.empty() ? 1.0 : sample_weights[r];
}

// The pinball loss's slope in u = target - prediction: tau for u >= 0, tau - 1 below.
double pinball_slope(double u, double tau) { return u >= 0.0 ? tau : tau - 1.0; }

void require_pinball_args(const char* op, std::size_t rows, std::span<const double> prediction,
                          std::span<const double> target, std::span<const double> taus) {
  require(rows * taus.size() > 0, op, "the loss of an empty batch is undefined");
  require_size(op, "prediction", prediction.size(), rows * taus.size());
  require_size(op, "target", target.size(), rows);
  for (const double tau : taus) {
    require(tau > 0.0 && tau < 1.0, op, "tau = " + std::to_string(tau) + ", allowed (0, 1)");
  }
}

void require_categorical_args(const char* op, std::size_t rows, std::size_t cols,
                              std::span<const double> logits) {
  require(cols > 0, op, "a categorical distribution needs at least one class");
  require_size(op, "logits", logits.size(), rows * cols);
}

void require_actions(const char* op, std::size_t rows, std::size_t cols,
                     std::span<const std::int32_t> actions) {
  require_size(op, "actions", actions.size(), rows);
  for (const std::int32_t a : actions) {
    require(a >= 0 && static_cast<std::size_t>(a) < cols, op,
            "action " + std::to_string(a) + " outside [0, " + std::to_string(cols) + ")");
  }
}

}  // namespace

double mse_loss(std::span<const double> prediction, std::span<const double> target) {
  require(!prediction.empty(), "mse_loss", "the loss of an empty batch is undefined");
  require_size("mse_loss", "target", target.size(), prediction.size());
  double sum = 0.0;
  for (std::size_t i = 0; i < prediction.size(); ++i) {
    const double d = prediction[i] - target[i];
    sum += d * d;
  }
  return sum / static_cast<double>(prediction.size());
}

void mse_loss_backward(std::span<const double> prediction, std::span<const double> target,
                       double d_loss, std::span<double> d_prediction, GradMode mode) {
  require(!prediction.empty(), "mse_loss_backward", "the loss of an empty batch is undefined");
  require_size("mse_loss_backward", "target", target.size(), prediction.size());
  require_size("mse_loss_backward", "d_prediction", d_prediction.size(), prediction.size());
  const double scale = 2.0 * d_loss / static_cast<double>(prediction.size());
  for (std::size_t i = 0; i < prediction.size(); ++i)
    write_grad(d_prediction[i], scale * (prediction[i] - target[i]), mode);
}

double huber_loss(std::size_t rows, std::size_t cols, std::span<const double> prediction,
                  std::span<const double> target, std::span<const double> sample_weights,
                  double delta) {
  require_huber_args("huber_loss", rows, cols, prediction, target, sample_weights, delta);
  double sum = 0.0;
  for (std::size_t r = 0; r < rows; ++r) {
    double row_sum = 0.0;
    for (std::size_t c = 0; c < cols; ++c) {
      row_sum += huber(prediction[r * cols + c] - target[r * cols + c], delta);
    }
    sum += sample_weight(sample_weights, r) * row_sum;
  }
  return sum / static_cast<double>(rows * cols);
}

void huber_loss_backward(std::size_t rows, std::size_t cols, std::span<const double> prediction,
                         std::span<const double> target, std::span<const double> sample_weights,
                         double delta, double d_loss, std::span<double> d_prediction,
                         GradMode mode) {
  constexpr const char* kOp = "huber_loss_backward";
  require_huber_args(kOp, rows, cols, prediction, target, sample_weights, delta);
  require_size(kOp, "d_prediction", d_prediction.size(), rows * cols);
  const double scale = d_loss / static_cast<double>(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const double weight = sample_weight(sample_weights, r);
    for (std::size_t c = 0; c < cols; ++c) {
      const std::size_t i = r * cols + c;
      write_grad(d_prediction[i],
                 scale * weight * huber_derivative(prediction[i] - target[i], delta), mode);
    }
  }
}

double pinball_loss(std::size_t rows, std::span<const double> prediction,
                    std::span<const double> target, std::span<const double> taus) {
  require_pinball_args("pinball_loss", rows, prediction, target, taus);
  const std::size_t k_count = taus.size();
  double sum = 0.0;
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t k = 0; k < k_count; ++k) {
      const double u = target[r] - prediction[r * k_count + k];
      sum += pinball_slope(u, taus[k]) * u;
    }
  }
  return sum / static_cast<double>(rows * k_count);
}

// dL/dprediction_rk = -slope(u_rk, tau_k) / (rows * K)
void pinball_loss_backward(std::size_t rows, std::span<const double> prediction,
                           std::span<const double> target, std::span<const double> taus,
                           double d_loss, std::span<double> d_prediction, GradMode mode) {
  require_pinball_args("pinball_loss_backward", rows, prediction, target, taus);
  require_size("pinball_loss_backward", "d_prediction", d_prediction.size(), prediction.size());
  const std::size_t k_count = taus.size();
  const double scale = d_loss / static_cast<double>(rows * k_count);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t k = 0; k < k_count; ++k) {
      const std::size_t i = r * k_count + k;
      write_grad(d_prediction[i], -scale * pinball_slope(target[r] - prediction[i], taus[k]), mode);
    }
  }
}

std::vector<double> categorical_log_prob(std::size_t rows, std::size_t cols,
                                         std::span<const double> logits,
                                         std::span<const std::int32_t> actions) {
  require_categorical_args("categorical_log_prob", rows, cols, logits);
  require_actions("categorical_log_prob", rows, cols, actions);
  const std::vector<double> log_p = log_softmax_forward(rows, cols, logits, SoftmaxMask::None);
  std::vector<double> log_prob(rows);
  for (std::size_t r = 0; r < rows; ++r)
    log_prob[r] = log_p[r * cols + static_cast<std::size_t>(actions[r])];
  return log_prob;
}

// d_logits_rc = d_log_prob_r * (1[c == action_r] - p_rc)
void categorical_log_prob_backward(std::size_t rows, std::size_t cols,
                                   std::span<const double> logits,
                                   std::span<const std::int32_t> actions,
                                   std::span<const double> d_log_prob, std::span<double> d_logits,
                                   GradMode mode) {
  constexpr const char* kOp = "categorical_log_prob_backward";
  require_categorical_args(kOp, rows, cols, logits);
  require_actions(kOp, rows, cols, actions);
  require_size(kOp, "d_log_prob", d_log_prob.size(), rows);
  require_size(kOp, "d_logits", d_logits.size(), rows * cols);
  const std::vector<double> p = softmax_forward(rows, cols, logits, SoftmaxMask::None);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      const double chosen = c == static_cast<std::size_t>(actions[r]) ? 1.0 : 0.0;
      write_grad(d_logits[r * cols + c], d_log_prob[r] * (chosen - p[r * cols + c]), mode);
    }
  }
}

std::vector<double> categorical_entropy(std::size_t rows, std::size_t cols,
                                        std::span<const double> logits) {
  require_categorical_args("categorical_entropy", rows, cols, logits);
  const std::vector<double> log_p = log_softmax_forward(rows, cols, logits, SoftmaxMask::None);
  std::vector<double> entropy(rows, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      const double lp = log_p[r * cols + c];
      entropy[r] -= std::exp(lp) * lp;
    }
  }
  return entropy;
}

// d_logits_rc = -d_entropy_r * p_rc * (log p_rc + H_r)
void categorical_entropy_backward(std::size_t rows, std::size_t cols,
                                  std::span<const double> logits, std::span<const double> d_entropy,
                                  std::span<double> d_logits, GradMode mode) {
  constexpr const char* kOp = "categorical_entropy_backward";
  require_categorical_args(kOp, rows, cols, logits);
  require_size(kOp, "d_entropy", d_entropy.size(), rows);
  require_size(kOp, "d_logits", d_logits.size(), rows * cols);
  const std::vector<double> log_p = log_softmax_forward(rows, cols, logits, SoftmaxMask::None);
  const std::vector<double> entropy = categorical_entropy(rows, cols, logits);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      const double lp = log_p[r * cols + c];
      write_grad(d_logits[r * cols + c], -d_entropy[r] * std::exp(lp) * (lp + entropy[r]), mode);
    }
  }
}

}  // namespace resident::reference
