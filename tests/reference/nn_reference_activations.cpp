// Elementwise activations (ReLU, tanh, sigmoid, SiLU, GELU-tanh, ELU, softplus), the run-time
// dispatch used by the MLP, and GLU.
#include <cmath>
#include <numbers>
#include <string>

#include "tests/reference/nn_reference.h"
#include "tests/reference/nn_reference_checks.h"

namespace resident::reference {

using detail::require;
using detail::require_size;
using detail::write_grad;

namespace {

// y[i] = value(x[i])
template <typename Value>
std::vector<double> map_elementwise(std::span<const double> x, Value value) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = value(x[i]);
  return y;
}

// dx[i] (=|+=) dy[i] * derivative(x[i])
template <typename Derivative>
void elementwise_backward(const char* op, std::span<const double> x, std::span<const double> dy,
                          std::span<double> dx, GradMode mode, Derivative derivative) {
  require_size(op, "dy", dy.size(), x.size());
  require_size(op, "dx", dx.size(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) write_grad(dx[i], dy[i] * derivative(x[i]), mode);
}

// Without overflow of e^-x for large negative x.
double sigmoid(double x) {
  if (x >= 0.0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

// log(1 + e^x) without overflow.
double log1p_exp(double x) {
  return x > 0.0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

constexpr double kGeluCubic = 0.044715;
constexpr double kSqrt2OverPi = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // sqrt(2 / pi)

// tanh(sqrt(2/pi) (x + 0.044715 x^3))
double gelu_tanh_gate(double x) { return std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)); }

double gelu_tanh(double x) { return 0.5 * x * (1.0 + gelu_tanh_gate(x)); }

double gelu_tanh_derivative(double x) {
  const double t = gelu_tanh_gate(x);
  const double inner_derivative = kSqrt2OverPi * (1.0 + 3.0 * kGeluCubic * x * x);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * inner_derivative;
}

void require_softplus_beta(const char* op, double beta) {
  require(beta > 0.0 && std::isfinite(beta), op,
          "beta = " + std::to_string(beta) + ", must be > 0");
}

}  // namespace

std::vector<double> relu_forward(std::span<const double> x) {
  return map_elementwise(x, [](double v) { return v > 0.0 ? v : 0.0; });
}
void relu_backward(std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                   GradMode mode) {
  elementwise_backward("relu_backward", x, dy, dx, mode,
                       [](double v) { return v > 0.0 ? 1.0 : 0.0; });
}

std::vector<double> tanh_forward(std::span<const double> x) {
  return map_elementwise(x, [](double v) { return std::tanh(v); });
}
void tanh_backward(std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                   GradMode mode) {
  elementwise_backward("tanh_backward", x, dy, dx, mode, [](double v) {
    const double t = std::tanh(v);
    return 1.0 - t * t;
  });
}

std::vector<double> sigmoid_forward(std::span<const double> x) {
  return map_elementwise(x, sigmoid);
}
void sigmoid_backward(std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                      GradMode mode) {
  elementwise_backward("sigmoid_backward", x, dy, dx, mode, [](double v) {
    const double s = sigmoid(v);
    return s * (1.0 - s);
  });
}

std::vector<double> silu_forward(std::span<const double> x) {
  return map_elementwise(x, [](double v) { return v * sigmoid(v); });
}
void silu_backward(std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                   GradMode mode) {
  elementwise_backward("silu_backward", x, dy, dx, mode, [](double v) {
    const double s = sigmoid(v);
    return s * (1.0 + v * (1.0 - s));
  });
}

std::vector<double> gelu_tanh_forward(std::span<const double> x) {
  return map_elementwise(x, gelu_tanh);
}
void gelu_tanh_backward(std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                        GradMode mode) {
  elementwise_backward("gelu_tanh_backward", x, dy, dx, mode, gelu_tanh_derivative);
}

std::vector<double> elu_forward(std::span<const double> x, double alpha) {
  return map_elementwise(x, [alpha](double v) { return v > 0.0 ? v : alpha * std::expm1(v); });
}
void elu_backward(std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                  double alpha, GradMode mode) {
  elementwise_backward("elu_backward", x, dy, dx, mode,
                       [alpha](double v) { return v > 0.0 ? 1.0 : alpha * std::exp(v); });
}

std::vector<double> softplus_forward(std::span<const double> x, double beta, double threshold) {
  require_softplus_beta("softplus_forward", beta);
  return map_elementwise(x, [beta, threshold](double v) {
    return beta * v > threshold ? v : log1p_exp(beta * v) / beta;
  });
}
void softplus_backward(std::span<const double> x, std::span<const double> dy, std::span<double> dx,
                       double beta, double threshold, GradMode mode) {
  require_softplus_beta("softplus_backward", beta);
  elementwise_backward("softplus_backward", x, dy, dx, mode, [beta, threshold](double v) {
    return beta * v > threshold ? 1.0 : sigmoid(beta * v);
  });
}

std::vector<double> activation_forward(const Activation& activation, std::span<const double> x) {
  switch (activation.kind) {
    case ActivationKind::Identity:
      return {x.begin(), x.end()};
    case ActivationKind::Relu:
      return relu_forward(x);
    case ActivationKind::Tanh:
      return tanh_forward(x);
    case ActivationKind::Sigmoid:
      return sigmoid_forward(x);
    case ActivationKind::Silu:
      return silu_forward(x);
    case ActivationKind::GeluTanh:
      return gelu_tanh_forward(x);
    case ActivationKind::Elu:
      return elu_forward(x, activation.elu_alpha);
    case ActivationKind::Softplus:
      return softplus_forward(x, activation.softplus_beta, activation.softplus_threshold);
  }
  require(false, "activation_forward", "unknown ActivationKind");
  return {};
}

void activation_backward(const Activation& activation, std::span<const double> x,
                         std::span<const double> dy, std::span<double> dx, GradMode mode) {
  switch (activation.kind) {
    case ActivationKind::Identity:
      return elementwise_backward("identity_backward", x, dy, dx, mode, [](double) { return 1.0; });
    case ActivationKind::Relu:
      return relu_backward(x, dy, dx, mode);
    case ActivationKind::Tanh:
      return tanh_backward(x, dy, dx, mode);
    case ActivationKind::Sigmoid:
      return sigmoid_backward(x, dy, dx, mode);
    case ActivationKind::Silu:
      return silu_backward(x, dy, dx, mode);
    case ActivationKind::GeluTanh:
      return gelu_tanh_backward(x, dy, dx, mode);
    case ActivationKind::Elu:
      return elu_backward(x, dy, dx, activation.elu_alpha, mode);
    case ActivationKind::Softplus:
      return softplus_backward(x, dy, dx, activation.softplus_beta, activation.softplus_threshold,
                               mode);
  }
  require(false, "activation_backward", "unknown ActivationKind");
}

std::vector<double> glu_forward(std::size_t rows, std::size_t half, std::span<const double> x) {
  require_size("glu_forward", "x", x.size(), rows * 2 * half);
  std::vector<double> y(rows * half);
  for (std::size_t r = 0; r < rows; ++r) {
    const auto a = x.subspan(r * 2 * half, half);
    const auto b = x.subspan(r * 2 * half + half, half);
    for (std::size_t c = 0; c < half; ++c) y[r * half + c] = a[c] * sigmoid(b[c]);
  }
  return y;
}

// da = dy sigmoid(b), db = dy a sigmoid(b) (1 - sigmoid(b))
void glu_backward(std::size_t rows, std::size_t half, std::span<const double> x,
                  std::span<const double> dy, std::span<double> dx, GradMode mode) {
  require_size("glu_backward", "x", x.size(), rows * 2 * half);
  require_size("glu_backward", "dy", dy.size(), rows * half);
  require_size("glu_backward", "dx", dx.size(), rows * 2 * half);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t a_begin = r * 2 * half;
    const std::size_t b_begin = a_begin + half;
    for (std::size_t c = 0; c < half; ++c) {
      const double a = x[a_begin + c];
      const double s = sigmoid(x[b_begin + c]);
      const double upstream = dy[r * half + c];
      write_grad(dx[a_begin + c], upstream * s, mode);
      write_grad(dx[b_begin + c], upstream * a * s * (1.0 - s), mode);
    }
  }
}

}  // namespace resident::reference
