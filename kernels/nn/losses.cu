// MSE, weighted Huber and pinball losses with their gradients, and the mean of a vector
// (contracts in losses.h).
// partial_sums: loss_partials_count(n) blocks of 256 threads; thread t of block b adds terms
//   b * 256 + t, then strides of gridDim * 256, in order; the block's threads are combined by the
//   fixed-order tree of row_reduce.cuh into partials[b].
// finish_mean: one block adds partials[0..count) the same way, divides by n in double, writes the
//   float. Both passes have fixed orders; no atomics.
// Gradients: one grid-stride thread per element, overwriting or accumulating.
#include <algorithm>
#include <string>

#include "kernels/nn/huber.cuh"
#include "kernels/nn/losses.h"
#include "kernels/nn/row_reduce.cuh"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

using rowwise::kRowThreads;

constexpr std::size_t kTermsPerPartial = 2048;  // 8 terms per thread when not clamped
constexpr std::size_t kMaxPartials = 1024;

// The pinball loss's slope in u = target - prediction.
__device__ inline float pinball_slope(float u, float tau) { return u >= 0.0f ? tau : tau - 1.0f; }

struct MseTerm {
  const float* prediction;
  const float* target;
  __device__ float operator()(std::size_t i) const {
    const float d = prediction[i] - target[i];
    return d * d;
  }
};

struct HuberTerm {
  const float* prediction;
  const float* target;
  const float* sample_weights;  // [rows] or null
  std::size_t cols;
  float delta;
  __device__ float operator()(std::size_t i) const {
    const float h = huber::value(prediction[i] - target[i], delta);
    return sample_weights != nullptr ? sample_weights[i / cols] * h : h;
  }
};

struct PinballTerm {
  const float* prediction;
  const float* target;
  const float* taus;
  std::size_t quantiles;
  __device__ float operator()(std::size_t i) const {
    const float u = target[i / quantiles] - prediction[i];
    return pinball_slope(u, taus[i % quantiles]) * u;
  }
};

struct ValueTerm {
  const float* values;
  __device__ float operator()(std::size_t i) const { return values[i]; }
};

struct MseGradient {
  const float* prediction;
  const float* target;
  float scale;  // 2 d_loss / n
  __device__ float operator()(std::size_t i) const { return scale * (prediction[i] - target[i]); }
};

struct HuberGradient {
  const float* prediction;
  const float* target;
  const float* sample_weights;  // [rows] or null
  std::size_t cols;
  float delta;
  float scale;  // d_loss / (rows * cols)
  __device__ float operator()(std::size_t i) const {
    const float weight = sample_weights != nullptr ? scale * sample_weights[i / cols] : scale;
    return weight * huber::derivative(prediction[i] - target[i], delta);
  }
};

struct PinballGradient {
  const float* prediction;
  const float* target;
  const float* taus;
  std::size_t quantiles;
  float scale;  // d_loss / (rows * K)
  __device__ float operator()(std::size_t i) const {
    const float u = target[i / quantiles] - prediction[i];
    return -scale * pinball_slope(u, taus[i % quantiles]);
  }
};

template <class Term>
__global__ void __launch_bounds__(kRowThreads)
    partial_sums(float* partials, Term term, std::size_t n) {
  float sum = 0.0f;
  for (std::size_t i = blockIdx.x * std::size_t{kRowThreads} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * kRowThreads)
    sum += term(i);
  sum = rowwise::BlockGroup::all_reduce(sum, rowwise::Sum{});
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void __launch_bounds__(kRowThreads)
    finish_mean(float* out, const float* partials, std::size_t count, double divisor) {
  float sum = 0.0f;
  for (std::size_t i = threadIdx.x; i < count; i += kRowThreads) sum += partials[i];
  sum = rowwise::BlockGroup::all_reduce(sum, rowwise::Sum{});
  if (threadIdx.x == 0) *out = static_cast<float>(static_cast<double>(sum) / divisor);
}

template <class Gradient>
__global__ void __launch_bounds__(kRowThreads)
    elementwise_gradient(float* d_prediction, Gradient gradient, std::size_t n, bool accumulate) {
  for (std::size_t i = blockIdx.x * std::size_t{kRowThreads} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * kRowThreads)
    rowwise::write_grad(d_prediction + i, gradient(i), accumulate);
}

// out = (sum of term(i) for i < n) / n.
template <class Term>
void reduce_mean(const char* op, float* out, float* partials, std::size_t partials_count, Term term,
                 std::size_t n, cudaStream_t stream) {
  RESIDENT_ROWWISE_REQUIRE(n > 0, op, "the loss of an empty batch is undefined");
  const std::size_t blocks = loss_partials_count(n);
  RESIDENT_ROWWISE_REQUIRE(partials != nullptr && partials_count >= blocks, op,
                           "partials hold " + std::to_string(partials_count) +
                               " floats, need loss_partials_count(" + std::to_string(n) +
                               ") = " + std::to_string(blocks));
  partial_sums<<<static_cast<unsigned>(blocks), kRowThreads, 0, stream>>>(partials, term, n);
  RESIDENT_CHECK_LAUNCH("partial_sums");
  finish_mean<<<1, kRowThreads, 0, stream>>>(out, partials, blocks, static_cast<double>(n));
  RESIDENT_CHECK_LAUNCH("finish_mean");
}

template <class Gradient>
void launch_gradient(const char* op, float* d_prediction, Gradient gradient, std::size_t n,
                     nn::GradMode mode, cudaStream_t stream) {
  RESIDENT_ROWWISE_REQUIRE(n > 0, op, "the loss of an empty batch is undefined");
  elementwise_gradient<<<rowwise::elementwise_grid(n), kRowThreads, 0, stream>>>(
      d_prediction, gradient, n, mode == nn::GradMode::Accumulate);
  RESIDENT_CHECK_LAUNCH("elementwise_gradient");
}

void check_delta(const char* op, float delta) {
  RESIDENT_ROWWISE_REQUIRE(delta > 0.0f, op, "delta = " + std::to_string(delta) + ", must be > 0");
}

}  // namespace

std::size_t loss_partials_count(std::size_t n) {
  return std::clamp<std::size_t>((n + kTermsPerPartial - 1) / kTermsPerPartial, 1, kMaxPartials);
}

void launch_mse_loss(float* loss, float* partials, std::size_t partials_count,
                     const float* prediction, const float* target, std::size_t n,
                     cudaStream_t stream) {
  const NvtxRange range("nn/mse_loss");
  reduce_mean("mse_loss", loss, partials, partials_count, MseTerm{prediction, target}, n, stream);
}

void launch_mse_loss_backward(float* d_prediction, const float* prediction, const float* target,
                              std::size_t n, float d_loss, nn::GradMode mode, cudaStream_t stream) {
  const NvtxRange range("nn/mse_loss_backward");
  const auto scale = static_cast<float>(2.0 * d_loss / static_cast<double>(n));
  launch_gradient("mse_loss_backward", d_prediction, MseGradient{prediction, target, scale}, n,
                  mode, stream);
}

void launch_huber_loss(float* loss, float* partials, std::size_t partials_count,
                       const float* prediction, const float* target, const float* sample_weights,
                       std::size_t rows, std::size_t cols, float delta, cudaStream_t stream) {
  const NvtxRange range("nn/huber_loss");
  check_delta("huber_loss", delta);
  reduce_mean("huber_loss", loss, partials, partials_count,
              HuberTerm{prediction, target, sample_weights, cols, delta}, rows * cols, stream);
}

void launch_huber_loss_backward(float* d_prediction, const float* prediction, const float* target,
                                const float* sample_weights, std::size_t rows, std::size_t cols,
                                float delta, float d_loss, nn::GradMode mode, cudaStream_t stream) {
  const NvtxRange range("nn/huber_loss_backward");
  check_delta("huber_loss_backward", delta);
  const std::size_t n = rows * cols;
  const auto scale = static_cast<float>(d_loss / static_cast<double>(n));
  launch_gradient("huber_loss_backward", d_prediction,
                  HuberGradient{prediction, target, sample_weights, cols, delta, scale}, n, mode,
                  stream);
}

void launch_pinball_loss(float* loss, float* partials, std::size_t partials_count,
                         const float* prediction, const float* target, const float* taus,
                         std::size_t rows, std::size_t quantiles, cudaStream_t stream) {
  const NvtxRange range("nn/pinball_loss");
  reduce_mean("pinball_loss", loss, partials, partials_count,
              PinballTerm{prediction, target, taus, quantiles}, rows * quantiles, stream);
}

void launch_pinball_loss_backward(float* d_prediction, const float* prediction, const float* target,
                                  const float* taus, std::size_t rows, std::size_t quantiles,
                                  float d_loss, nn::GradMode mode, cudaStream_t stream) {
  const NvtxRange range("nn/pinball_loss_backward");
  const std::size_t n = rows * quantiles;
  const auto scale = static_cast<float>(d_loss / static_cast<double>(n));
  launch_gradient("pinball_loss_backward", d_prediction,
                  PinballGradient{prediction, target, taus, quantiles, scale}, n, mode, stream);
}

void launch_mean(float* mean, float* partials, std::size_t partials_count, const float* values,
                 std::size_t n, cudaStream_t stream) {
  const NvtxRange range("nn/mean");
  reduce_mean("mean", mean, partials, partials_count, ValueTerm{values}, n, stream);
}

}  // namespace resident::kernels
