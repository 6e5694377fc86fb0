#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/xlstm/headwise_dense.h"

namespace resident::kernels::xlstm {

namespace {

constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    headwise_to_dense(float* __restrict__ dense, std::size_t ld, const float* __restrict__ W,
                      std::size_t nb, std::size_t bo, std::size_t bi) {
  const std::size_t cols = nb * bi, total = nb * bo * cols;
  for (std::size_t e = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; e < total;
       e += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t row = e / cols, col = e % cols, blk = row / bo;
    dense[row * ld + col] = col / bi == blk ? W[row * bi + col % bi] : 0.0f;
  }
}

__global__ void __launch_bounds__(kThreads)
    dense_to_headwise_add(float* __restrict__ dW, const float* __restrict__ dense, std::size_t ld,
                          std::size_t nb, std::size_t bo, std::size_t bi) {
  const std::size_t total = nb * bo * bi;
  for (std::size_t e = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; e < total;
       e += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t row = e / bi, i = e % bi, blk = row / bo;
    dW[e] += dense[row * ld + blk * bi + i];
  }
}

}  // namespace

void launch_headwise_to_dense(float* dense, std::size_t ld, const float* W, std::size_t nb,
                              std::size_t bo, std::size_t bi, cudaStream_t stream) {
  if (ld < nb * bi)
    throw Error("launch_headwise_to_dense", "invalid argument",
                "ld = " + std::to_string(ld) + ", allowed >= nb * bi = " +
                    std::to_string(nb * bi),
                __FILE__, __LINE__);
  const NvtxRange range("xlstm/headwise_to_dense");
  const std::size_t total = nb * bo * nb * bi;
  if (total == 0) return;
  headwise_to_dense<<<grid_stride_blocks(total, kThreads), kThreads, 0, stream>>>(dense, ld, W,
                                                                                  nb, bo, bi);
  RESIDENT_CHECK_LAUNCH("headwise_to_dense");
}

void launch_dense_to_headwise_add(float* dW, const float* dense, std::size_t ld, std::size_t nb,
                                  std::size_t bo, std::size_t bi, cudaStream_t stream) {
  if (ld < nb * bi)
    throw Error("launch_dense_to_headwise_add", "invalid argument",
                "ld = " + std::to_string(ld) + ", allowed >= nb * bi = " +
                    std::to_string(nb * bi),
                __FILE__, __LINE__);
  const NvtxRange range("xlstm/dense_to_headwise_add");
  const std::size_t total = nb * bo * bi;
  if (total == 0) return;
  dense_to_headwise_add<<<grid_stride_blocks(total, kThreads), kThreads, 0, stream>>>(
      dW, dense, ld, nb, bo, bi);
  RESIDENT_CHECK_LAUNCH("dense_to_headwise_add");
}

}  // namespace resident::kernels::xlstm
