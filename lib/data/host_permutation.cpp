#include "lib/data/host_permutation.h"

#include <algorithm>
#include <array>
#include <numeric>

namespace resident::data {

namespace {

// Philox4x32-10 (Salmon et al., SC'11): ten rounds on a 128-bit counter with a 64-bit key.
std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> c,
                                           std::array<std::uint32_t, 2> k) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t{kMul0} * c[0];
    const std::uint64_t p1 = std::uint64_t{kMul1} * c[2];
    c = {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<std::uint32_t>(p1),
         static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<std::uint32_t>(p0)};
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  return c;
}

// The first output of curand_init(seed, subsequence, offset) with offset a multiple of 4: word 0
// of counter block (offset / 4 in the low 64 bits, subsequence in the high 64 bits).
std::uint32_t first_draw(std::uint64_t seed, std::uint64_t subsequence, std::uint64_t offset) {
  const std::uint64_t block = offset / 4;
  return philox4x32_10(
      {static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
       static_cast<std::uint32_t>(subsequence), static_cast<std::uint32_t>(subsequence >> 32)},
      {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)})[0];
}

}  // namespace

std::vector<std::uint32_t> host_random_permutation(std::size_t n, std::uint64_t philox_seed,
                                                   std::uint64_t draw) {
  std::vector<std::uint32_t> keys(n), order(n);
  for (std::size_t i = 0; i < n; ++i) keys[i] = first_draw(philox_seed, i, 4 * draw);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return keys[a] < keys[b]; });
  return order;
}

}  // namespace resident::data
