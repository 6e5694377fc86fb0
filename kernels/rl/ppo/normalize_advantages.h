// Advantage normalization on the device (kernels/rl/ppo/normalize_advantages.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::ppo {

// Doubles of scratch that launch_normalize_advantages needs for n values: 2 * P with
// P = ceil(n / 2048) clamped to [1, 1024] (a function of n alone).
std::size_t normalize_partials_count(std::size_t n);

// In place over advantages [n] (n >= 1), tests/reference normalize_advantages:
//   mean = sum / n,  std = sqrt(sum (a - mean)^2 / n)  (population),  a = (a - mean) / (std + eps)
// Two-pass, in fp64: P blocks each sum a fixed grid-stride share into partials; every block of
// the next pass re-adds the P partials in the same order (so all agree on the mean) and sums its
// squared deviations; the last pass does the same for the std and rewrites its share.
// Deterministic (no atomics; the split depends on n only); capturable.
void launch_normalize_advantages(float* advantages, double* partials,
                                 std::size_t partials_count, std::size_t n, float epsilon,
                                 cudaStream_t stream);

}  // namespace resident::kernels::ppo
