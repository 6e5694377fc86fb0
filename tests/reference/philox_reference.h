// Philox4x32-10 (Salmon et al., SC'11) on the CPU, written from the paper's round function,
// and the cuRAND stream layout on top of it: the oracle of the device Philox helper.
#pragma once

#include <array>
#include <cstdint>

namespace resident::reference {

using PhiloxCounter = std::array<std::uint32_t, 4>;
using PhiloxKey2x32 = std::array<std::uint32_t, 2>;

// Ten rounds of Philox4x32 on one counter block.
PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey2x32 key);

// The n-th 32-bit output of cuRAND's curand_init(seed, subsequence, offset) stream:
// key = seed, counter block = (offset + n) / 4 in the low 64 bits, subsequence in the high
// 64 bits, word (offset + n) % 4 of the block.
std::uint32_t curand_philox_draw(std::uint64_t seed, std::uint64_t subsequence,
                                 std::uint64_t offset, std::uint64_t n);

}  // namespace resident::reference
