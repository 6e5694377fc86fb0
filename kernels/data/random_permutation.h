// A random permutation of n items on the device (kernels/data/random_permutation.cu): the
// per-epoch shuffle of a trainer's samples. Same contract and bits as PPO's minibatch
// permutation (kernels/rl/ppo/permutation.h), so either can serve both.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::data {

// Scratch of one permutation of n items, sized once at construction (no allocation later).
struct PermutationScratch {
  std::uint32_t* keys_in = nullptr;    // [n]
  std::uint32_t* keys_out = nullptr;   // [n]
  std::uint32_t* values_in = nullptr;  // [n]
  void* temp = nullptr;                // [temp_bytes] CUB radix-sort storage
  std::size_t temp_bytes = 0;
};

// Bytes of CUB temp storage for a permutation of n items (host query, setup only). Throws
// resident::Error for n == 0 or n > 2^31 - 1.
std::size_t permutation_temp_bytes(std::size_t n);

// permutation [n] (overwritten) = the indices 0..n-1 ordered by 32-bit random keys: key i is
// the first draw of cuRAND Philox4x32-10 (seed = philox_seed, subsequence = i,
// offset = 4 * (*counter / counter_divisor)); ties keep index order (stable LSD radix sort of
// cub::DeviceRadixSort::SortPairs). The counter is only read, on the device, so a graph replay
// or a later launch with an advanced counter gives the next permutation. Deterministic;
// nothing allocated or synchronized (capturable). Throws resident::Error for an invalid n or
// counter_divisor == 0. The host mirror is lib/data/host_permutation.h.
void launch_random_permutation(std::uint32_t* permutation, const PermutationScratch& scratch,
                               std::size_t n, std::uint64_t philox_seed,
                               const std::uint64_t* counter, std::uint64_t counter_divisor,
                               cudaStream_t stream);

}  // namespace resident::kernels::data
