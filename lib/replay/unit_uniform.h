// unit_uniform: one double uniform on [0, 1) from one 64-bit draw, the draw every CPU replay
// sampler uses. Exact and portable (std::uniform_real_distribution is implementation-defined
// and may return 1.0): the top 53 bits of the draw times 2^-53, so the result is a multiple
// of 2^-53 in [0, 1 - 2^-53].
#pragma once

#include <cstdint>
#include <random>

namespace resident {

inline double unit_uniform(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

}  // namespace resident
