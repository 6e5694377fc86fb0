#include "tests/reference/philox_reference.h"

namespace resident::reference {

namespace {
constexpr std::uint32_t kMul0 = 0xD2511F53u;
constexpr std::uint32_t kMul1 = 0xCD9E8D57u;
constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;
constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;

void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t* hi, std::uint32_t* lo) {
  const std::uint64_t product = std::uint64_t{a} * std::uint64_t{b};
  *hi = static_cast<std::uint32_t>(product >> 32);
  *lo = static_cast<std::uint32_t>(product);
}
}  // namespace

PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey2x32 k) {
  for (int round = 0; round < 10; ++round) {
    std::uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMul0, c[0], &hi0, &lo0);
    mulhilo(kMul1, c[2], &hi1, &lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  return c;
}

std::uint32_t curand_philox_draw(std::uint64_t seed, std::uint64_t subsequence,
                                 std::uint64_t offset, std::uint64_t n) {
  const std::uint64_t position = offset + n;
  const std::uint64_t block = position / 4;
  const PhiloxCounter counter{static_cast<std::uint32_t>(block),
                              static_cast<std::uint32_t>(block >> 32),
                              static_cast<std::uint32_t>(subsequence),
                              static_cast<std::uint32_t>(subsequence >> 32)};
  const PhiloxKey2x32 key{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
  return philox4x32_10(counter, key)[position % 4];
}

}  // namespace resident::reference
