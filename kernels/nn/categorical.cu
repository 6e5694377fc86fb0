// Categorical log-prob and entropy from logits, forward and backward (contracts in
// categorical.h). Per row (row group, row_reduce.cuh): an online (max, sum e^(x - max)) pass,
// then, when the entropy is wanted, a pass adding t = sum e^z z (z = x - max), so that
// H = log(sum) - t / sum; the backward then writes every column in one more pass. Fixed
// reduction orders, no atomics.
#include <cmath>

#include "kernels/nn/categorical.h"
#include "kernels/nn/row_reduce.cuh"
#include "lib/core/nvtx_range.h"

namespace resident::kernels {

namespace {

using rowwise::kRowThreads;

struct RowStats {
  float max;      // of the row's logits
  float sum;      // sum e^(x - max)
  float log_sum;  // log(sum): log p = x - max - log_sum
  float entropy;  // H, when asked for (else 0)
};

// Every thread of the group gets the same stats.
template <class Group>
__device__ RowStats row_stats(const float* x_row, std::size_t cols, bool want_entropy) {
  rowwise::MaxSum acc{-INFINITY, 0.0f};
  for (std::size_t c = Group::rank(); c < cols; c += Group::size())
    acc = rowwise::max_sum_add(acc, x_row[c]);
  acc = Group::all_reduce(acc, rowwise::MaxSumCombine{});
  RowStats stats{acc.max, acc.sum, logf(acc.sum), 0.0f};
  if (want_entropy) {
    float t = 0.0f;
    for (std::size_t c = Group::rank(); c < cols; c += Group::size()) {
      const float z = x_row[c] - acc.max;
      t += expf(z) * z;
    }
    stats.entropy = stats.log_sum - Group::all_reduce(t, rowwise::Sum{}) / acc.sum;
  }
  return stats;
}

__device__ inline bool valid_action(std::int32_t action, std::size_t cols) {
  return action >= 0 && static_cast<std::size_t>(action) < cols;
}

template <class Group>
__global__ void __launch_bounds__(kRowThreads)
    categorical_forward(float* log_prob, float* entropy, const float* logits,
                        const std::int32_t* actions, std::size_t rows, std::size_t cols) {
  const std::size_t row = Group::row();
  if (row >= rows) return;
  const float* x_row = logits + row * cols;
  const RowStats stats = row_stats<Group>(x_row, cols, entropy != nullptr);
  if (Group::rank() != 0) return;
  if (log_prob != nullptr) {
    const std::int32_t action = actions[row];
    log_prob[row] = valid_action(action, cols)
                        ? (x_row[static_cast<std::size_t>(action)] - stats.max) - stats.log_sum
                        : NAN;
  }
  if (entropy != nullptr) entropy[row] = stats.entropy;
}

template <class Group>
__global__ void __launch_bounds__(kRowThreads)
    categorical_backward(float* d_logits, const float* logits, const std::int32_t* actions,
                         const float* d_log_prob, const float* d_entropy, std::size_t rows,
                         std::size_t cols, bool accumulate) {
  const std::size_t row = Group::row();
  if (row >= rows) return;
  const float* x_row = logits + row * cols;
  float* d_row = d_logits + row * cols;
  const RowStats stats = row_stats<Group>(x_row, cols, d_entropy != nullptr);
  const float d_lp = d_log_prob != nullptr ? d_log_prob[row] : 0.0f;
  const float d_h = d_entropy != nullptr ? d_entropy[row] : 0.0f;
  const std::int32_t action = d_log_prob != nullptr ? actions[row] : 0;
  const bool bad_action = d_log_prob != nullptr && !valid_action(action, cols);

  for (std::size_t c = Group::rank(); c < cols; c += Group::size()) {
    const float z = x_row[c] - stats.max;
    const float p = expf(z) / stats.sum;
    float gradient = 0.0f;
    if (d_log_prob != nullptr)
      gradient += d_lp * ((c == static_cast<std::size_t>(action) ? 1.0f : 0.0f) - p);
    if (d_entropy != nullptr) gradient -= d_h * p * ((z - stats.log_sum) + stats.entropy);
    rowwise::write_grad(d_row + c, bad_action ? NAN : gradient, accumulate);
  }
}

}  // namespace

void launch_categorical_forward(float* log_prob, float* entropy, const float* logits,
                                const std::int32_t* actions, std::size_t rows, std::size_t cols,
                                cudaStream_t stream) {
  const NvtxRange range("nn/categorical_forward");
  if (rows == 0 || cols == 0 || (log_prob == nullptr && entropy == nullptr)) return;
  rowwise::for_row_group(cols, [&](auto group) {
    using Group = decltype(group);
    categorical_forward<Group>
        <<<rowwise::grid_size(Group::blocks(rows), "categorical_forward"), kRowThreads, 0,
           stream>>>(log_prob, entropy, logits, actions, rows, cols);
  });
  RESIDENT_CHECK_LAUNCH("categorical_forward");
}

void launch_categorical_backward(float* d_logits, const float* logits, const std::int32_t* actions,
                                 const float* d_log_prob, const float* d_entropy, std::size_t rows,
                                 std::size_t cols, nn::GradMode mode, cudaStream_t stream) {
  const NvtxRange range("nn/categorical_backward");
  const bool accumulate = mode == nn::GradMode::Accumulate;
  if (rows == 0 || cols == 0) return;
  if (accumulate && d_log_prob == nullptr && d_entropy == nullptr) return;
  rowwise::for_row_group(cols, [&](auto group) {
    using Group = decltype(group);
    categorical_backward<Group>
        <<<rowwise::grid_size(Group::blocks(rows), "categorical_backward"), kRowThreads, 0,
           stream>>>(d_logits, logits, actions, d_log_prob, d_entropy, rows, cols, accumulate);
  });
  RESIDENT_CHECK_LAUNCH("categorical_backward");
}

}  // namespace resident::kernels
