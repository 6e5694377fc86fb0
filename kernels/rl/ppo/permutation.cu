// Random keys from Philox, then a CUB radix sort of (key, index) pairs (contract in
// permutation.h).
#include "kernels/rl/ppo/permutation.h"

#include <climits>
#include <cub/device/device_radix_sort.cuh>
#include <string>

#include "kernels/core/launch_config.h"
#include "kernels/core/philox.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::ppo {

namespace {

constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    random_keys(std::uint32_t* keys, std::uint32_t* values, std::size_t n,
                std::uint64_t philox_seed, const std::uint64_t* counter,
                std::uint64_t counter_divisor) {
  const std::uint64_t draw = *counter / counter_divisor;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    curandStatePhilox4_32_10_t state = philox_state({philox_seed, 4 * draw}, i);
    keys[i] = curand(&state);
    values[i] = static_cast<std::uint32_t>(i);
  }
}

int checked_items(std::size_t n) {
  if (n == 0 || n > static_cast<std::size_t>(INT_MAX))
    throw Error("random_permutation", "invalid argument",
                "n = " + std::to_string(n) + ", allowed [1, 2147483647]", __FILE__, __LINE__);
  return static_cast<int>(n);
}

}  // namespace

std::size_t permutation_temp_bytes(std::size_t n) {
  std::size_t bytes = 0;
  RESIDENT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const std::uint32_t*>(nullptr),
      static_cast<std::uint32_t*>(nullptr), static_cast<const std::uint32_t*>(nullptr),
      static_cast<std::uint32_t*>(nullptr), checked_items(n)));
  return bytes;
}

void launch_random_permutation(std::uint32_t* permutation, const PermutationScratch& scratch,
                               std::size_t n, std::uint64_t philox_seed,
                               const std::uint64_t* counter, std::uint64_t counter_divisor,
                               cudaStream_t stream) {
  const int items = checked_items(n);
  if (counter_divisor == 0)
    throw Error("launch_random_permutation", "invalid argument", "counter_divisor = 0, allowed >= 1",
                __FILE__, __LINE__);
  const NvtxRange range("ppo/random_permutation");
  random_keys<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(
      scratch.keys_in, scratch.values_in, n, philox_seed, counter, counter_divisor);
  RESIDENT_CHECK_LAUNCH("random_keys");
  std::size_t bytes = scratch.temp_bytes;
  RESIDENT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(scratch.temp, bytes, scratch.keys_in,
                                                      scratch.keys_out, scratch.values_in,
                                                      permutation, items, 0, 32, stream));
}

}  // namespace resident::kernels::ppo
