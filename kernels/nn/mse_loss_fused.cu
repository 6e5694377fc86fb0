// Fused MSE loss + gradient (contract in mse_loss_fused.h).
// mse_loss_fused: mse_loss_fused_partials_count(n) blocks of 256 threads; thread t of block b
//   visits i = b * 256 + t, then strides of gridDim * 256, in order: writes the gradient of term i
//   and adds (p - t)^2 to its sum; the block's sums combine by the fixed-order tree of
//   row_reduce.cuh into partials[b]. Thread 0 then fences (the partial is visible device-wide
//   before the ticket) and takes a ticket with atomicInc(counter, gridDim - 1), which wraps to 0
//   on the last ticket. The block with the last ticket fences, reads partials[0..gridDim) through
//   L2 in index order (thread u: u, u + 256, ...), tree-reduces them, and thread 0 writes
//   sum / n (divided in double). Same orders as launch_mse_loss: the value is that kernel pair's.
#include <algorithm>
#include <string>

#include "kernels/nn/losses.h"
#include "kernels/nn/mse_loss_fused.h"
#include "kernels/nn/row_reduce.cuh"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

using rowwise::kRowThreads;

__global__ void __launch_bounds__(kRowThreads)
    mse_loss_fused(float* loss, float* d_prediction, float* partials, unsigned int* counter,
                   const float* prediction, const float* target, std::size_t n, float scale,
                   double divisor, bool accumulate) {
  float sum = 0.0f;
  for (std::size_t i = blockIdx.x * std::size_t{kRowThreads} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * kRowThreads) {
    const float d = prediction[i] - target[i];
    rowwise::write_grad(d_prediction + i, scale * d, accumulate);
    sum += d * d;
  }
  sum = rowwise::BlockGroup::all_reduce(sum, rowwise::Sum{});
  __shared__ bool last_block;
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = sum;
    __threadfence();  // the partial reaches L2 before the ticket is taken
    last_block = atomicInc(counter, gridDim.x - 1) == gridDim.x - 1;  // wraps *counter to 0
  }
  __syncthreads();
  if (!last_block) return;  // uniform across the block
  __threadfence();          // every other block's partial is visible to this one
  float total = 0.0f;
  for (std::size_t b = threadIdx.x; b < gridDim.x; b += kRowThreads) total += __ldcg(partials + b);
  total = rowwise::BlockGroup::all_reduce(total, rowwise::Sum{});
  if (threadIdx.x == 0) *loss = static_cast<float>(static_cast<double>(total) / divisor);
}

}  // namespace

std::size_t mse_loss_fused_partials_count(std::size_t n) { return loss_partials_count(n); }

void launch_mse_loss_fused(float* loss, float* d_prediction, float* partials,
                           std::size_t partials_count, unsigned int* counter,
                           const float* prediction, const float* target, std::size_t n,
                           float d_loss, nn::GradMode mode, cudaStream_t stream) {
  const NvtxRange range("nn/mse_loss_fused");
  RESIDENT_ROWWISE_REQUIRE(n > 0, "mse_loss_fused", "the loss of an empty batch is undefined");
  const std::size_t blocks = mse_loss_fused_partials_count(n);
  RESIDENT_ROWWISE_REQUIRE(partials != nullptr && partials_count >= blocks, "mse_loss_fused",
                           "partials hold " + std::to_string(partials_count) +
                               " floats, need mse_loss_fused_partials_count(" + std::to_string(n) +
                               ") = " + std::to_string(blocks));
  RESIDENT_ROWWISE_REQUIRE(counter != nullptr, "mse_loss_fused", "counter is null");
  RESIDENT_ROWWISE_REQUIRE(loss != nullptr && d_prediction != nullptr, "mse_loss_fused",
                           std::string(loss == nullptr ? "loss" : "d_prediction") + " is null");
  const auto scale = static_cast<float>(2.0 * d_loss / static_cast<double>(n));
  mse_loss_fused<<<static_cast<unsigned>(blocks), kRowThreads, 0, stream>>>(
      loss, d_prediction, partials, counter, prediction, target, n, scale, static_cast<double>(n),
      mode == nn::GradMode::Accumulate);
  RESIDENT_CHECK_LAUNCH("mse_loss_fused");
}

}  // namespace resident::kernels
