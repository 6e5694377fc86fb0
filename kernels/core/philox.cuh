// Device side of resident::PhiloxKey: the cuRAND Philox4x32-10 state of one element.
// Element `subsequence` of a launch keyed by `key` draws from counter block
// (key.offset / 4, subsequence) onward; streams of different elements never overlap.
#pragma once

#include <curand_kernel.h>

#include "kernels/core/philox.h"

namespace resident::kernels {

__device__ inline curandStatePhilox4_32_10_t philox_state(PhiloxKey key,
                                                          unsigned long long subsequence) {
  curandStatePhilox4_32_10_t state;
  curand_init(key.seed, subsequence, key.offset, &state);
  return state;
}

}  // namespace resident::kernels
