// RMSNorm forward and backward (contracts in rms_norm.h).
// forward: per row (row group, row_reduce.cuh) sum of squares -> rstd, then the writing pass.
// backward_dx: per row, one reduction (sum g * x), then the writing pass.
// dgamma_partials: grid (column tiles, row chunks); one thread per column adds dy * x * rstd over
//   its chunk's rows in order into scratch [chunks, cols]; launch_sum_column_partials adds the
//   chunks in order. No atomics; fixed orders throughout.
#include <algorithm>
#include <string>

#include "kernels/nn/column_partials.h"
#include "kernels/nn/rms_norm.h"
#include "kernels/nn/row_reduce.cuh"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

using rowwise::kRowThreads;

template <class Group>
__global__ void __launch_bounds__(kRowThreads)
    rms_norm_forward(float* y, float* rstd_out, const float* x, const float* gamma,
                     std::size_t rows, std::size_t cols, float eps) {
  const std::size_t row = Group::row();
  if (row >= rows) return;
  const float* x_row = x + row * cols;
  float* y_row = y + row * cols;

  float squares = 0.0f;
  for (std::size_t c = Group::rank(); c < cols; c += Group::size()) squares += x_row[c] * x_row[c];
  const float rstd =
      1.0f / sqrtf(Group::all_reduce(squares, rowwise::Sum{}) / static_cast<float>(cols) + eps);

  for (std::size_t c = Group::rank(); c < cols; c += Group::size())
    y_row[c] = x_row[c] * rstd * gamma[c];
  if (Group::rank() == 0 && rstd_out != nullptr) rstd_out[row] = rstd;
}

template <class Group>
__global__ void __launch_bounds__(kRowThreads)
    rms_norm_backward_dx(float* dx, const float* x, const float* gamma, const float* rstd,
                         const float* dy, std::size_t rows, std::size_t cols, bool accumulate) {
  const std::size_t row = Group::row();
  if (row >= rows) return;
  const float* x_row = x + row * cols;
  const float* dy_row = dy + row * cols;
  float* dx_row = dx + row * cols;
  const float s = rstd[row];

  float dot = 0.0f;  // sum g * x
  for (std::size_t c = Group::rank(); c < cols; c += Group::size())
    dot += dy_row[c] * gamma[c] * x_row[c];
  const float g_x_mean = Group::all_reduce(dot, rowwise::Sum{}) / static_cast<float>(cols);
  const float correction = s * s * g_x_mean;

  for (std::size_t c = Group::rank(); c < cols; c += Group::size()) {
    const float g = dy_row[c] * gamma[c];
    rowwise::write_grad(dx_row + c, s * (g - x_row[c] * correction), accumulate);
  }
}

// partials [chunks, cols]
__global__ void __launch_bounds__(kRowThreads)
    rms_norm_dgamma_partials(float* partials, const float* x, const float* rstd, const float* dy,
                             std::size_t rows, std::size_t cols, std::size_t chunk_rows) {
  const std::size_t c = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (c >= cols) return;
  const std::size_t chunk = blockIdx.y;
  const std::size_t first = chunk * chunk_rows;
  const std::size_t last = std::min(rows, first + chunk_rows);
  float dgamma = 0.0f;
  for (std::size_t r = first; r < last; ++r)
    dgamma += dy[r * cols + c] * (x[r * cols + c] * rstd[r]);
  partials[chunk * cols + c] = dgamma;
}

}  // namespace

void launch_rms_norm_forward(float* y, float* rstd, const float* x, const float* gamma,
                             std::size_t rows, std::size_t cols, float eps, cudaStream_t stream) {
  const NvtxRange range("nn/rms_norm_forward");
  constexpr const char* kOp = "rms_norm_forward";
  RESIDENT_ROWWISE_REQUIRE(eps > 0.0f, kOp, "eps = " + std::to_string(eps) + ", must be > 0");
  if (rows == 0 || cols == 0) return;
  rowwise::for_row_group(cols, [&](auto group) {
    using Group = decltype(group);
    rms_norm_forward<Group>
        <<<rowwise::grid_size(Group::blocks(rows), kOp), kRowThreads, 0, stream>>>(
            y, rstd, x, gamma, rows, cols, eps);
  });
  RESIDENT_CHECK_LAUNCH("rms_norm_forward");
}

std::size_t rms_norm_backward_scratch_floats(std::size_t rows, std::size_t cols) {
  return column_chunks(rows) * cols;
}

void launch_rms_norm_backward(float* dx, float* dgamma, float* scratch, std::size_t scratch_floats,
                              const float* x, const float* gamma, const float* rstd,
                              const float* dy, std::size_t rows, std::size_t cols,
                              nn::GradMode mode, cudaStream_t stream) {
  const NvtxRange range("nn/rms_norm_backward");
  constexpr const char* kOp = "rms_norm_backward";
  if (cols == 0) return;
  // dgamma first: it reads dy, which a caller may overwrite with dx.
  if (dgamma != nullptr) {
    const std::size_t needed = rms_norm_backward_scratch_floats(rows, cols);
    RESIDENT_ROWWISE_REQUIRE(scratch != nullptr && scratch_floats >= needed, kOp,
                             "scratch holds " + std::to_string(scratch_floats) + " floats, needs " +
                                 std::to_string(needed));
    const std::size_t chunks = column_chunks(rows);
    const dim3 grid(rowwise::grid_size((cols + kRowThreads - 1) / kRowThreads, kOp),
                    static_cast<unsigned>(chunks));
    rms_norm_dgamma_partials<<<grid, kRowThreads, 0, stream>>>(scratch, x, rstd, dy, rows, cols,
                                                               column_chunk_rows(rows));
    RESIDENT_CHECK_LAUNCH("rms_norm_dgamma_partials");
    launch_sum_column_partials(dgamma, scratch, chunks, cols, mode, stream);
  }
  if (dx != nullptr && rows > 0) {
    const bool accumulate = mode == nn::GradMode::Accumulate;
    rowwise::for_row_group(cols, [&](auto group) {
      using Group = decltype(group);
      rms_norm_backward_dx<Group>
          <<<rowwise::grid_size(Group::blocks(rows), kOp), kRowThreads, 0, stream>>>(
              dx, x, gamma, rstd, dy, rows, cols, accumulate);
    });
    RESIDENT_CHECK_LAUNCH("rms_norm_backward_dx");
  }
}

}  // namespace resident::kernels
