// Softmax and log-softmax over rows, forward and backward (contracts in softmax.h).
// Forward: one pass of an online (max, sum e^(x - max)) per thread over its visible columns,
// combined across the row group, then one writing pass. Backward: one reduction (sum y dy, or
// sum dy) across the row group, then one writing pass. Row groups and their fixed reduction
// order are in row_reduce.cuh; the group is picked from cols alone, so results are reproducible.
#include <string>

#include "kernels/nn/row_reduce.cuh"
#include "kernels/nn/softmax.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

using rowwise::kRowThreads;

// Columns [0, visible) of `row` take part; the rest are masked.
__device__ inline std::size_t visible_columns(std::size_t row, std::size_t cols, bool causal) {
  return causal ? row % cols + 1 : cols;
}

template <class Group, bool kLog>
__global__ void __launch_bounds__(kRowThreads)
    softmax_forward(float* y, const float* x, std::size_t rows, std::size_t cols, bool causal) {
  const std::size_t row = Group::row();
  if (row >= rows) return;
  const std::size_t visible = visible_columns(row, cols, causal);
  const float* x_row = x + row * cols;
  float* y_row = y + row * cols;

  rowwise::MaxSum acc{-INFINITY, 0.0f};
  for (std::size_t c = Group::rank(); c < visible; c += Group::size())
    acc = rowwise::max_sum_add(acc, x_row[c]);
  acc = Group::all_reduce(acc, rowwise::MaxSumCombine{});

  const float log_sum = logf(acc.sum);
  for (std::size_t c = Group::rank(); c < cols; c += Group::size()) {
    if (c < visible) {
      const float shifted = x_row[c] - acc.max;
      y_row[c] = kLog ? shifted - log_sum : expf(shifted) / acc.sum;
    } else {
      y_row[c] = kLog ? -INFINITY : 0.0f;
    }
  }
}

// kLog false: y = softmax, dx = y (dy - sum y dy). kLog true: y = log-softmax,
// dx = dy - e^y sum dy.
template <class Group, bool kLog>
__global__ void __launch_bounds__(kRowThreads)
    softmax_backward(float* dx, const float* y, const float* dy, std::size_t rows, std::size_t cols,
                     bool causal, bool accumulate) {
  const std::size_t row = Group::row();
  if (row >= rows) return;
  const std::size_t visible = visible_columns(row, cols, causal);
  const float* y_row = y + row * cols;
  const float* dy_row = dy + row * cols;
  float* dx_row = dx + row * cols;

  float partial = 0.0f;
  for (std::size_t c = Group::rank(); c < visible; c += Group::size())
    partial += kLog ? dy_row[c] : y_row[c] * dy_row[c];
  const float total = Group::all_reduce(partial, rowwise::Sum{});

  for (std::size_t c = Group::rank(); c < cols; c += Group::size()) {
    float gradient = 0.0f;
    if (c < visible)
      gradient = kLog ? dy_row[c] - expf(y_row[c]) * total : y_row[c] * (dy_row[c] - total);
    rowwise::write_grad(dx_row + c, gradient, accumulate);
  }
}

void check_shape(const char* op, std::size_t rows, std::size_t cols, nn::SoftmaxMask mask) {
  RESIDENT_ROWWISE_REQUIRE(
      mask == nn::SoftmaxMask::None || rows % cols == 0, op,
      "a causal mask needs a stack of [T, T] matrices: rows = " + std::to_string(rows) +
          " is not a multiple of T = cols = " + std::to_string(cols));
}

template <bool kLog>
void launch_forward(const char* op, float* y, const float* x, std::size_t rows, std::size_t cols,
                    nn::SoftmaxMask mask, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  check_shape(op, rows, cols, mask);
  const bool causal = mask == nn::SoftmaxMask::Causal;
  rowwise::for_row_group(cols, [&](auto group) {
    using Group = decltype(group);
    softmax_forward<Group, kLog>
        <<<rowwise::grid_size(Group::blocks(rows), op), kRowThreads, 0, stream>>>(y, x, rows, cols,
                                                                                  causal);
  });
  RESIDENT_CHECK_LAUNCH("softmax_forward");
}

template <bool kLog>
void launch_backward(const char* op, float* dx, const float* y, const float* dy, std::size_t rows,
                     std::size_t cols, nn::SoftmaxMask mask, nn::GradMode mode,
                     cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  check_shape(op, rows, cols, mask);
  const bool causal = mask == nn::SoftmaxMask::Causal;
  const bool accumulate = mode == nn::GradMode::Accumulate;
  rowwise::for_row_group(cols, [&](auto group) {
    using Group = decltype(group);
    softmax_backward<Group, kLog>
        <<<rowwise::grid_size(Group::blocks(rows), op), kRowThreads, 0, stream>>>(
            dx, y, dy, rows, cols, causal, accumulate);
  });
  RESIDENT_CHECK_LAUNCH("softmax_backward");
}

}  // namespace

void launch_softmax_forward(float* y, const float* x, std::size_t rows, std::size_t cols,
                            nn::SoftmaxMask mask, cudaStream_t stream) {
  const NvtxRange range("nn/softmax_forward");
  launch_forward<false>("softmax_forward", y, x, rows, cols, mask, stream);
}

void launch_log_softmax_forward(float* y, const float* x, std::size_t rows, std::size_t cols,
                                nn::SoftmaxMask mask, cudaStream_t stream) {
  const NvtxRange range("nn/log_softmax_forward");
  launch_forward<true>("log_softmax_forward", y, x, rows, cols, mask, stream);
}

void launch_softmax_backward(float* dx, const float* y, const float* dy, std::size_t rows,
                             std::size_t cols, nn::SoftmaxMask mask, nn::GradMode mode,
                             cudaStream_t stream) {
  const NvtxRange range("nn/softmax_backward");
  launch_backward<false>("softmax_backward", dx, y, dy, rows, cols, mask, mode, stream);
}

void launch_log_softmax_backward(float* dx, const float* y, const float* dy, std::size_t rows,
                                 std::size_t cols, nn::SoftmaxMask mask, nn::GradMode mode,
                                 cudaStream_t stream) {
  const NvtxRange range("nn/log_softmax_backward");
  launch_backward<true>("log_softmax_backward", dx, y, dy, rows, cols, mask, mode, stream);
}

}  // namespace resident::kernels
