// LayerNorm forward and backward (contracts in layer_norm.h).
// forward: per row (row group, row_reduce.cuh) sum -> mean, sum of squared deviations -> rstd, then
//   the writing pass.
// backward_dx: per row, one paired reduction (sum g, sum g * xhat), then the writing pass.
// param_partials: grid (column tiles, row chunks); one thread per column adds dy * xhat and dy
//   over its chunk's rows in order into scratch [chunks, cols] (twice: dgamma, then dbeta part);
//   launch_sum_column_partials adds the chunks in order. No atomics; fixed orders throughout.
#include <algorithm>
#include <string>

#include "kernels/nn/column_partials.h"
#include "kernels/nn/layer_norm.h"
#include "kernels/nn/row_reduce.cuh"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

using rowwise::kRowThreads;

template <class Group>
__global__ void __launch_bounds__(kRowThreads)
    layer_norm_forward(float* y, float* mean_out, float* rstd_out, const float* x,
                       const float* gamma, const float* beta, std::size_t rows, std::size_t cols,
                       float eps) {
  const std::size_t row = Group::row();
  if (row >= rows) return;
  const float* x_row = x + row * cols;
  float* y_row = y + row * cols;
  const float n = static_cast<float>(cols);

  float sum = 0.0f;
  for (std::size_t c = Group::rank(); c < cols; c += Group::size()) sum += x_row[c];
  const float mean = Group::all_reduce(sum, rowwise::Sum{}) / n;

  float squares = 0.0f;
  for (std::size_t c = Group::rank(); c < cols; c += Group::size()) {
    const float d = x_row[c] - mean;
    squares += d * d;
  }
  const float rstd = 1.0f / sqrtf(Group::all_reduce(squares, rowwise::Sum{}) / n + eps);

  for (std::size_t c = Group::rank(); c < cols; c += Group::size()) {
    const float shift = beta != nullptr ? beta[c] : 0.0f;
    y_row[c] = (x_row[c] - mean) * rstd * gamma[c] + shift;
  }
  if (Group::rank() == 0) {
    if (mean_out != nullptr) mean_out[row] = mean;
    if (rstd_out != nullptr) rstd_out[row] = rstd;
  }
}

template <class Group>
__global__ void __launch_bounds__(kRowThreads)
    layer_norm_backward_dx(float* dx, const float* x, const float* gamma, const float* mean,
                           const float* rstd, const float* dy, std::size_t rows, std::size_t cols,
                           bool accumulate) {
  const std::size_t row = Group::row();
  if (row >= rows) return;
  const float* x_row = x + row * cols;
  const float* dy_row = dy + row * cols;
  float* dx_row = dx + row * cols;
  const float m = mean[row];
  const float s = rstd[row];
  const float n = static_cast<float>(cols);

  float2 sums = make_float2(0.0f, 0.0f);  // (sum g, sum g * xhat)
  for (std::size_t c = Group::rank(); c < cols; c += Group::size()) {
    const float g = dy_row[c] * gamma[c];
    sums.x += g;
    sums.y += g * ((x_row[c] - m) * s);
  }
  sums = Group::all_reduce(sums, rowwise::Sum{});
  const float g_mean = sums.x / n;
  const float g_xhat_mean = sums.y / n;

  for (std::size_t c = Group::rank(); c < cols; c += Group::size()) {
    const float g = dy_row[c] * gamma[c];
    const float xhat = (x_row[c] - m) * s;
    rowwise::write_grad(dx_row + c, s * (g - g_mean - xhat * g_xhat_mean), accumulate);
  }
}

// dgamma_partials/dbeta_partials [chunks, cols], either may be null.
__global__ void __launch_bounds__(kRowThreads)
    layer_norm_param_partials(float* dgamma_partials, float* dbeta_partials, const float* x,
                              const float* mean, const float* rstd, const float* dy,
                              std::size_t rows, std::size_t cols, std::size_t chunk_rows) {
  const std::size_t c = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (c >= cols) return;
  const std::size_t chunk = blockIdx.y;
  const std::size_t first = chunk * chunk_rows;
  const std::size_t last = std::min(rows, first + chunk_rows);
  float dgamma = 0.0f, dbeta = 0.0f;
  for (std::size_t r = first; r < last; ++r) {
    const float d = dy[r * cols + c];
    dgamma += d * ((x[r * cols + c] - mean[r]) * rstd[r]);
    dbeta += d;
  }
  if (dgamma_partials != nullptr) dgamma_partials[chunk * cols + c] = dgamma;
  if (dbeta_partials != nullptr) dbeta_partials[chunk * cols + c] = dbeta;
}

}  // namespace

void launch_layer_norm_forward(float* y, float* mean, float* rstd, const float* x,
                               const float* gamma, const float* beta, std::size_t rows,
                               std::size_t cols, float eps, cudaStream_t stream) {
  const NvtxRange range("nn/layer_norm_forward");
  constexpr const char* kOp = "layer_norm_forward";
  RESIDENT_ROWWISE_REQUIRE(eps > 0.0f, kOp, "eps = " + std::to_string(eps) + ", must be > 0");
  if (rows == 0 || cols == 0) return;
  rowwise::for_row_group(cols, [&](auto group) {
    using Group = decltype(group);
    layer_norm_forward<Group>
        <<<rowwise::grid_size(Group::blocks(rows), kOp), kRowThreads, 0, stream>>>(
            y, mean, rstd, x, gamma, beta, rows, cols, eps);
  });
  RESIDENT_CHECK_LAUNCH("layer_norm_forward");
}

std::size_t layer_norm_backward_scratch_floats(std::size_t rows, std::size_t cols) {
  return 2 * column_chunks(rows) * cols;
}

void launch_layer_norm_backward(float* dx, float* dgamma, float* dbeta, float* scratch,
                                std::size_t scratch_floats, const float* x, const float* gamma,
                                const float* mean, const float* rstd, const float* dy,
                                std::size_t rows, std::size_t cols, nn::GradMode mode,
                                cudaStream_t stream) {
  const NvtxRange range("nn/layer_norm_backward");
  constexpr const char* kOp = "layer_norm_backward";
  if (cols == 0) return;
  const bool params = dgamma != nullptr || dbeta != nullptr;
  if (params) {
    const std::size_t needed = layer_norm_backward_scratch_floats(rows, cols);
    RESIDENT_ROWWISE_REQUIRE(scratch != nullptr && scratch_floats >= needed, kOp,
                             "scratch holds " + std::to_string(scratch_floats) + " floats, needs " +
                                 std::to_string(needed));
  }
  // Parameter gradients first: they read dy, which a caller may overwrite with dx.
  if (params) {
    const std::size_t chunks = column_chunks(rows);
    float* dgamma_partials = dgamma != nullptr ? scratch : nullptr;
    float* dbeta_partials = dbeta != nullptr ? scratch + chunks * cols : nullptr;
    const dim3 grid(rowwise::grid_size((cols + kRowThreads - 1) / kRowThreads, kOp),
                    static_cast<unsigned>(chunks));
    layer_norm_param_partials<<<grid, kRowThreads, 0, stream>>>(
        dgamma_partials, dbeta_partials, x, mean, rstd, dy, rows, cols, column_chunk_rows(rows));
    RESIDENT_CHECK_LAUNCH("layer_norm_param_partials");
    if (dgamma != nullptr)
      launch_sum_column_partials(dgamma, dgamma_partials, chunks, cols, mode, stream);
    if (dbeta != nullptr)
      launch_sum_column_partials(dbeta, dbeta_partials, chunks, cols, mode, stream);
  }
  if (dx != nullptr && rows > 0) {
    const bool accumulate = mode == nn::GradMode::Accumulate;
    rowwise::for_row_group(cols, [&](auto group) {
      using Group = decltype(group);
      layer_norm_backward_dx<Group>
          <<<rowwise::grid_size(Group::blocks(rows), kOp), kRowThreads, 0, stream>>>(
              dx, x, gamma, mean, rstd, dy, rows, cols, accumulate);
    });
    RESIDENT_CHECK_LAUNCH("layer_norm_backward_dx");
  }
}

}  // namespace resident::kernels
