// Deterministic two-pass mean/std normalization (contract in normalize_advantages.h).
#include "kernels/rl/ppo/normalize_advantages.h"

#include <algorithm>
#include <cub/block/block_reduce.cuh>
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::ppo {

namespace {

constexpr unsigned kThreads = 256;
using BlockSum = cub::BlockReduce<double, kThreads>;

// The sum of partials [count] in a fixed order; every thread of the block gets it.
__device__ double sum_partials(const double* partials, std::size_t count,
                               typename BlockSum::TempStorage& temp, double* broadcast) {
  double s = 0.0;
  for (std::size_t i = threadIdx.x; i < count; i += kThreads) s += partials[i];
  const double total = BlockSum(temp).Sum(s);
  if (threadIdx.x == 0) *broadcast = total;
  __syncthreads();
  const double result = *broadcast;
  __syncthreads();
  return result;
}

__global__ void __launch_bounds__(kThreads)
    sum_pass(double* partials, const float* a, std::size_t n) {
  __shared__ typename BlockSum::TempStorage temp;
  double s = 0.0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * kThreads)
    s += static_cast<double>(a[i]);
  const double total = BlockSum(temp).Sum(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void __launch_bounds__(kThreads)
    deviation_pass(double* deviation_partials, const double* sum_partials_in, const float* a,
                   std::size_t n) {
  __shared__ typename BlockSum::TempStorage temp;
  __shared__ double broadcast;
  const double mean = sum_partials(sum_partials_in, gridDim.x, temp, &broadcast) /
                      static_cast<double>(n);
  double s = 0.0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * kThreads) {
    const double d = static_cast<double>(a[i]) - mean;
    s += d * d;
  }
  const double total = BlockSum(temp).Sum(s);
  if (threadIdx.x == 0) deviation_partials[blockIdx.x] = total;
}

__global__ void __launch_bounds__(kThreads)
    apply_pass(float* a, const double* sum_partials_in, const double* deviation_partials,
               std::size_t n, float epsilon) {
  __shared__ typename BlockSum::TempStorage temp;
  __shared__ double broadcast;
  const double count = static_cast<double>(n);
  const double mean = sum_partials(sum_partials_in, gridDim.x, temp, &broadcast) / count;
  const double std = sqrt(sum_partials(deviation_partials, gridDim.x, temp, &broadcast) / count);
  const double inverse = 1.0 / (std + static_cast<double>(epsilon));
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * kThreads)
    a[i] = static_cast<float>((static_cast<double>(a[i]) - mean) * inverse);
}

}  // namespace

std::size_t normalize_partials_count(std::size_t n) {
  return 2 * std::clamp<std::size_t>((n + 2047) / 2048, 1, 1024);
}

void launch_normalize_advantages(float* advantages, double* partials,
                                 std::size_t partials_count, std::size_t n, float epsilon,
                                 cudaStream_t stream) {
  if (n == 0 || partials_count < normalize_partials_count(n) || !(epsilon > 0.0f))
    throw Error("launch_normalize_advantages", "invalid argument",
                "n = " + std::to_string(n) + " (>= 1), partials_count = " +
                    std::to_string(partials_count) + " (>= " +
                    std::to_string(normalize_partials_count(n)) + "), epsilon = " +
                    std::to_string(epsilon) + " (> 0)",
                __FILE__, __LINE__);
  const NvtxRange range("ppo/normalize_advantages");
  const unsigned blocks = static_cast<unsigned>(normalize_partials_count(n) / 2);
  double* sums = partials;
  double* deviations = partials + blocks;
  sum_pass<<<blocks, kThreads, 0, stream>>>(sums, advantages, n);
  RESIDENT_CHECK_LAUNCH("normalize_advantages sum_pass");
  deviation_pass<<<blocks, kThreads, 0, stream>>>(deviations, sums, advantages, n);
  RESIDENT_CHECK_LAUNCH("normalize_advantages deviation_pass");
  apply_pass<<<blocks, kThreads, 0, stream>>>(advantages, sums, deviations, n, epsilon);
  RESIDENT_CHECK_LAUNCH("normalize_advantages apply_pass");
}

}  // namespace resident::kernels::ppo
