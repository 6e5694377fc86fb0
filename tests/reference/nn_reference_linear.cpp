// Linear: y = x W^T + b, and its backward (dx = dy W, dW = dy^T x, db = column sums of dy).
#include "tests/reference/nn_reference.h"
#include "tests/reference/nn_reference_checks.h"

namespace resident::reference {

using detail::require_size;
using detail::require_size_or_empty;
using detail::write_grad;

std::vector<double> linear_forward(const LinearShape& shape, std::span<const double> x,
                                   std::span<const double> weight, std::span<const double> bias) {
  const auto [batch, in, out] = shape;
  require_size("linear_forward", "x", x.size(), batch * in);
  require_size("linear_forward", "weight", weight.size(), out * in);
  require_size_or_empty("linear_forward", "bias", bias.size(), out);
  std::vector<double> y(batch * out);
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t o = 0; o < out; ++o) {
      double sum = bias.empty() ? 0.0 : bias[o];
      for (std::size_t i = 0; i < in; ++i) sum += x[b * in + i] * weight[o * in + i];
      y[b * out + o] = sum;
    }
  }
  return y;
}

namespace {

// dx[b, i] = sum_o dy[b, o] W[o, i]
void linear_input_grad(const LinearShape& shape, std::span<const double> weight,
                       std::span<const double> dy, std::span<double> dx, GradMode mode) {
  const auto [batch, in, out] = shape;
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t i = 0; i < in; ++i) {
      double sum = 0.0;
      for (std::size_t o = 0; o < out; ++o) sum += dy[b * out + o] * weight[o * in + i];
      write_grad(dx[b * in + i], sum, mode);
    }
  }
}

// dW[o, i] = sum_b dy[b, o] x[b, i]
void linear_weight_grad(const LinearShape& shape, std::span<const double> x,
                        std::span<const double> dy, std::span<double> dweight, GradMode mode) {
  const auto [batch, in, out] = shape;
  for (std::size_t o = 0; o < out; ++o) {
    for (std::size_t i = 0; i < in; ++i) {
      double sum = 0.0;
      for (std::size_t b = 0; b < batch; ++b) sum += dy[b * out + o] * x[b * in + i];
      write_grad(dweight[o * in + i], sum, mode);
    }
  }
}

// db[o] = sum_b dy[b, o]
void linear_bias_grad(const LinearShape& shape, std::span<const double> dy, std::span<double> dbias,
                      GradMode mode) {
  for (std::size_t o = 0; o < shape.out_features; ++o) {
    double sum = 0.0;
    for (std::size_t b = 0; b < shape.batch; ++b) sum += dy[b * shape.out_features + o];
    write_grad(dbias[o], sum, mode);
  }
}

}  // namespace

void linear_backward(const LinearShape& shape, std::span<const double> x,
                     std::span<const double> weight, std::span<const double> dy,
                     const LinearGrads& grads, GradMode mode) {
  const auto [batch, in, out] = shape;
  require_size("linear_backward", "x", x.size(), batch * in);
  require_size("linear_backward", "weight", weight.size(), out * in);
  require_size("linear_backward", "dy", dy.size(), batch * out);
  require_size_or_empty("linear_backward", "dx", grads.dx.size(), batch * in);
  require_size_or_empty("linear_backward", "dweight", grads.dweight.size(), out * in);
  require_size_or_empty("linear_backward", "dbias", grads.dbias.size(), out);
  if (!grads.dx.empty()) linear_input_grad(shape, weight, dy, grads.dx, mode);
  if (!grads.dweight.empty()) linear_weight_grad(shape, x, dy, grads.dweight, mode);
  if (!grads.dbias.empty()) linear_bias_grad(shape, dy, grads.dbias, mode);
}

}  // namespace resident::reference
