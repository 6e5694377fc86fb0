// The host mirror of the device shuffle (CPU, runs in CI) equals the independent Philox
// reference's permutation (tests/reference, written from the paper's round function) for sizes
// at the edges and several seeds and draws; different draws give different permutations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "lib/data/host_permutation.h"
#include "tests/reference/ppo_reference.h"

namespace {

TEST(HostPermutation, EqualsTheReferenceAndIsAPermutation) {
  for (const std::size_t n : {1u, 2u, 3u, 255u, 256u, 257u, 10007u})
    for (const std::uint64_t seed : {0ull, 1ull, 0x9E3779B97F4A7C15ull})
      for (const std::uint64_t draw : {0ull, 1ull, 17ull}) {
        const std::vector<std::uint32_t> p = resident::data::host_random_permutation(n, seed, draw);
        ASSERT_EQ(p, resident::reference::random_permutation(n, seed, draw))
            << "n " << n << ", seed " << seed << ", draw " << draw;
        std::vector<std::uint32_t> sorted = p, identity(n);
        std::sort(sorted.begin(), sorted.end());
        std::iota(identity.begin(), identity.end(), 0u);
        ASSERT_EQ(sorted, identity);
      }
}

TEST(HostPermutation, EachDrawIsANewOrder) {
  const auto a = resident::data::host_random_permutation(1000, 5, 0);
  const auto b = resident::data::host_random_permutation(1000, 5, 1);
  const auto c = resident::data::host_random_permutation(1000, 6, 0);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
}

}  // namespace
