// The host mirror of the device shuffle (kernels/data/random_permutation.h): the same
// permutation, computed on the CPU, for the host-fed pipeline (which shuffles on the host, as a
// typical data loader does) and as a readable statement of what the device computes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace resident::data {

// The indices 0 .. n - 1 ordered by key i = the first 32-bit output of cuRAND's Philox4x32-10
// stream curand_init(philox_seed, subsequence = i, offset = 4 * draw); ties keep index order.
// Equal to launch_random_permutation with *counter / counter_divisor == draw.
std::vector<std::uint32_t> host_random_permutation(std::size_t n, std::uint64_t philox_seed,
                                                   std::uint64_t draw);

}  // namespace resident::data
