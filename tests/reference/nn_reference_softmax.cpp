// Softmax and log-softmax over rows, optionally causal, with their backward.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "tests/reference/nn_reference.h"
#include "tests/reference/nn_reference_checks.h"

namespace resident::reference {

using detail::require;
using detail::require_size;
using detail::write_grad;

namespace {

void require_softmax_shape(const char* op, std::size_t rows, std::size_t cols, SoftmaxMask mask) {
  require(cols > 0, op, "cols must be > 0");
  require(mask == SoftmaxMask::None || rows % cols == 0, op,
          "a causal mask needs a stack of [T, T] matrices: rows = " + std::to_string(rows) +
              " is not a multiple of T = cols = " + std::to_string(cols));
}

// Columns [0, visible) of row r take part; the rest are masked.
std::size_t visible_columns(std::size_t r, std::size_t cols, SoftmaxMask mask) {
  return mask == SoftmaxMask::Causal ? r % cols + 1 : cols;
}

// One row's visible prefix shifted by its maximum (so no exponential overflows), and the sum of
// the shifted exponentials: softmax = e^shifted / sum, log-softmax = shifted - log(sum).
struct ShiftedRow {
  std::vector<double> shifted;
  double exp_sum = 0.0;
};

ShiftedRow shift_row(std::span<const double> visible) {
  const double max = *std::max_element(visible.begin(), visible.end());
  ShiftedRow row;
  row.shifted.resize(visible.size());
  for (std::size_t c = 0; c < visible.size(); ++c) {
    row.shifted[c] = visible[c] - max;
    row.exp_sum += std::exp(row.shifted[c]);
  }
  return row;
}

// Applies `write(shifted_row, out_row)` to the visible prefix of every row; masked entries of
// the result hold `masked_value`.
template <typename WriteRow>
std::vector<double> map_visible_rows(std::size_t rows, std::size_t cols, std::span<const double> x,
                                     SoftmaxMask mask, double masked_value, WriteRow write) {
  std::vector<double> y(rows * cols, masked_value);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t visible = visible_columns(r, cols, mask);
    write(shift_row(x.subspan(r * cols, visible)), std::span(y).subspan(r * cols, visible));
  }
  return y;
}

}  // namespace

std::vector<double> softmax_forward(std::size_t rows, std::size_t cols, std::span<const double> x,
                                    SoftmaxMask mask) {
  require_softmax_shape("softmax_forward", rows, cols, mask);
  require_size("softmax_forward", "x", x.size(), rows * cols);
  return map_visible_rows(rows, cols, x, mask, 0.0,
                          [](const ShiftedRow& row, std::span<double> out) {
                            for (std::size_t c = 0; c < out.size(); ++c)
                              out[c] = std::exp(row.shifted[c]) / row.exp_sum;
                          });
}

// dx_c = y_c (dy_c - sum_j y_j dy_j) over the visible columns, 0 at masked ones.
void softmax_backward(std::size_t rows, std::size_t cols, std::span<const double> x,
                      std::span<const double> dy, SoftmaxMask mask, std::span<double> dx,
                      GradMode mode) {
  require_size("softmax_backward", "dy", dy.size(), rows * cols);
  require_size("softmax_backward", "dx", dx.size(), rows * cols);
  const std::vector<double> y = softmax_forward(rows, cols, x, mask);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t visible = visible_columns(r, cols, mask);
    double y_dot_dy = 0.0;
    for (std::size_t c = 0; c < visible; ++c) y_dot_dy += y[r * cols + c] * dy[r * cols + c];
    for (std::size_t c = 0; c < cols; ++c) {
      const std::size_t i = r * cols + c;
      write_grad(dx[i], c < visible ? y[i] * (dy[i] - y_dot_dy) : 0.0, mode);
    }
  }
}

std::vector<double> log_softmax_forward(std::size_t rows, std::size_t cols,
                                        std::span<const double> x, SoftmaxMask mask) {
  require_softmax_shape("log_softmax_forward", rows, cols, mask);
  require_size("log_softmax_forward", "x", x.size(), rows * cols);
  return map_visible_rows(rows, cols, x, mask, -std::numeric_limits<double>::infinity(),
                          [](const ShiftedRow& row, std::span<double> out) {
                            const double log_sum = std::log(row.exp_sum);
                            for (std::size_t c = 0; c < out.size(); ++c)
                              out[c] = row.shifted[c] - log_sum;
                          });
}

// dx_c = dy_c - softmax_c * sum_j dy_j over the visible columns, 0 at masked ones.
void log_softmax_backward(std::size_t rows, std::size_t cols, std::span<const double> x,
                          std::span<const double> dy, SoftmaxMask mask, std::span<double> dx,
                          GradMode mode) {
  require_size("log_softmax_backward", "dy", dy.size(), rows * cols);
  require_size("log_softmax_backward", "dx", dx.size(), rows * cols);
  const std::vector<double> p = softmax_forward(rows, cols, x, mask);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t visible = visible_columns(r, cols, mask);
    double dy_sum = 0.0;
    for (std::size_t c = 0; c < visible; ++c) dy_sum += dy[r * cols + c];
    for (std::size_t c = 0; c < cols; ++c) {
      const std::size_t i = r * cols + c;
      write_grad(dx[i], c < visible ? dy[i] - p[i] * dy_sum : 0.0, mode);
    }
  }
}

}  // namespace resident::reference
