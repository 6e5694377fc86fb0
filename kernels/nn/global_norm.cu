// Global norm in two deterministic passes. sum_squares: each thread sums (in fp64, exact squares)
// its float4 groups i = tid, tid + stride, ... and then one element of the n % 4 tail if its
// global id is below the tail's length; cub::BlockReduce (fixed order for a fixed block size)
// writes one partial per block. finish_norm: one block sums the partials in a fixed order
// (global_norm_finish.cuh, shared with the clipping AdamW) and its thread 0 writes norm =
// sqrt(sum) and the clip scale.
#include <algorithm>
#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <string>

#include "kernels/nn/global_norm.h"
#include "kernels/nn/global_norm_finish.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr unsigned kBlock = 256;
constexpr std::size_t kElementsPerBlock = 4096;  // at least 16 elements per thread
constexpr std::size_t kMaxPartials = 1024;

using BlockSum = cub::BlockReduce<double, kBlock>;

__device__ __forceinline__ double square(float x) {
  const double d = x;
  return d * d;  // exact: 24-bit significands, 48-bit product
}

__global__ void __launch_bounds__(kBlock)
    sum_squares(double* __restrict__ partials, const float* __restrict__ grads, std::size_t n) {
  __shared__ typename BlockSum::TempStorage temp;
  const std::size_t groups = n / 4;
  const std::size_t first = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  const auto* g4 = reinterpret_cast<const float4*>(grads);
  double sum = 0.0;
  for (std::size_t i = first; i < groups; i += stride) {
    const float4 g = g4[i];
    sum += square(g.x);
    sum += square(g.y);
    sum += square(g.z);
    sum += square(g.w);
  }
  const std::size_t tail = groups * 4 + first;
  if (tail < n) sum += square(grads[tail]);
  const double block_sum = BlockSum(temp).Sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = block_sum;
}

__global__ void __launch_bounds__(global_norm_detail::kFinishThreads)
    finish_norm(float* __restrict__ norm, float* __restrict__ clip_scale,
                const double* __restrict__ partials, unsigned count, float max_norm) {
  __shared__ global_norm_detail::FinishSum::TempStorage temp;
  const global_norm_detail::NormAndScale result =
      global_norm_detail::finish(partials, count, max_norm, temp);
  if (threadIdx.x == 0) {
    *norm = result.norm;
    *clip_scale = result.scale;
  }
}

void require_aligned_grads(const float* grads, std::size_t n, const char* op) {
  if (n > 0 && reinterpret_cast<std::uintptr_t>(grads) % 16 != 0)
    throw Error(op, "misaligned argument", "grads must be 16-byte aligned", __FILE__, __LINE__);
}

}  // namespace

std::size_t global_norm_partial_count(std::size_t n) {
  return std::clamp<std::size_t>((n + kElementsPerBlock - 1) / kElementsPerBlock, 1, kMaxPartials);
}

void launch_global_norm_partials(double* partials, const float* grads, std::size_t n,
                                 cudaStream_t stream) {
  const NvtxRange range("nn/global_norm_partials");
  require_aligned_grads(grads, n, "launch_global_norm_partials");
  const auto blocks = static_cast<unsigned>(global_norm_partial_count(n));
  sum_squares<<<blocks, kBlock, 0, stream>>>(partials, grads, n);
  RESIDENT_CHECK_LAUNCH("sum_squares");
}

void launch_global_norm(float* norm, float* clip_scale, double* partials, const float* grads,
                        std::size_t n, float max_norm, cudaStream_t stream) {
  const NvtxRange range("nn/global_norm");
  require_aligned_grads(grads, n, "launch_global_norm");
  if (!(max_norm > 0.0f))
    throw Error("launch_global_norm", "invalid argument",
                "max_norm = " + std::to_string(max_norm) + ", must be > 0", __FILE__, __LINE__);
  const auto blocks = static_cast<unsigned>(global_norm_partial_count(n));
  sum_squares<<<blocks, kBlock, 0, stream>>>(partials, grads, n);
  RESIDENT_CHECK_LAUNCH("sum_squares");
  finish_norm<<<1, global_norm_detail::kFinishThreads, 0, stream>>>(norm, clip_scale, partials,
                                                                     blocks, max_norm);
  RESIDENT_CHECK_LAUNCH("finish_norm");
}

}  // namespace resident::kernels
