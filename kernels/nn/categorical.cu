// Categorical log-prob and entropy from logits, forward and backward (contracts in
// categorical.h). Per row (row group, row_reduce.cuh), the row math of categorical_row.cuh: an
// online (max, sum e^(x - max)) pass, then, when the entropy is wanted, a pass adding
// t = sum e^z z (z = x - max), so that H = log(sum) - t / sum; the backward then writes every
// column in one more pass. Fixed reduction orders, no atomics.
#include <cmath>

#include "kernels/nn/categorical.h"
#include "kernels/nn/categorical_row.cuh"
#include "kernels/nn/row_reduce.cuh"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

using rowwise::kRowThreads;

template <class Group>
__global__ void __launch_bounds__(kRowThreads)
    categorical_forward(float* log_prob, float* entropy, const float* logits,
                        const std::int32_t* actions, std::size_t rows, std::size_t cols) {
  const std::size_t row = Group::row();
  if (row >= rows) return;
  const float* x_row = logits + row * cols;
  const categorical_row::RowStats stats =
      categorical_row::row_stats<Group>(x_row, cols, entropy != nullptr);
  if (Group::rank() != 0) return;
  if (log_prob != nullptr)
    log_prob[row] = categorical_row::log_prob(x_row, cols, actions[row], stats);
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
  const categorical_row::RowStats stats =
      categorical_row::row_stats<Group>(x_row, cols, d_entropy != nullptr);
  const categorical_row::Upstream up{d_log_prob != nullptr,
                                     d_log_prob != nullptr ? d_log_prob[row] : 0.0f,
                                     d_log_prob != nullptr ? actions[row] : 0,
                                     d_entropy != nullptr,
                                     d_entropy != nullptr ? d_entropy[row] : 0.0f};
  categorical_row::backward_row<Group>(d_logits + row * cols, x_row, cols, stats, up, accumulate);
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
