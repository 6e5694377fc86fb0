// CpuSumTree: prefix-sum search (half-open intervals, boundaries, zero leaves, padding of
// non-power-of-two capacities) and the sum, min and max trees against brute force.
#include "lib/replay/cpu_sum_tree.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

namespace {

using resident::CpuSumTree;

// Exact (integer) priorities, so every cumulative sum is exact and boundaries are exact.
TEST(CpuSumTree, BoundaryMassPicksTheNextLeaf) {
  const std::vector<double> priorities = {2, 2, 0, 4, 3, 1, 0, 4};     // c = 2 4 4 8 11 12 12 16
  for (std::size_t capacity : {priorities.size(), std::size_t{11}}) {  // 11: padded to 16
    CpuSumTree tree(capacity);
    for (std::size_t i = 0; i < priorities.size(); ++i) tree.set(i, priorities[i]);
    ASSERT_EQ(tree.total(), 16.0);
    // [c_{i-1}, c_i) belongs to leaf i; a mass equal to c_i belongs to the next positive leaf.
    EXPECT_EQ(tree.find_prefix_sum(0.0), 0u);
    EXPECT_EQ(tree.find_prefix_sum(1.999), 0u);
    EXPECT_EQ(tree.find_prefix_sum(2.0), 1u);
    EXPECT_EQ(tree.find_prefix_sum(4.0), 3u);  // skips the zero leaf 2
    EXPECT_EQ(tree.find_prefix_sum(std::nextafter(4.0, 0.0)), 1u);
    EXPECT_EQ(tree.find_prefix_sum(8.0), 4u);
    EXPECT_EQ(tree.find_prefix_sum(11.0), 5u);
    EXPECT_EQ(tree.find_prefix_sum(12.0), 7u);  // skips the zero leaf 6
    EXPECT_EQ(tree.find_prefix_sum(15.999), 7u);
    // Past the total (rounding in a caller): the last positive leaf, never padding.
    EXPECT_EQ(tree.find_prefix_sum(16.0), 7u);
    EXPECT_EQ(tree.find_prefix_sum(100.0), 7u);
  }
}

TEST(CpuSumTree, EveryLeafIsFoundFromTheMiddleOfItsInterval) {
  std::mt19937_64 rng(11);
  for (std::size_t capacity : {1, 2, 3, 5, 7, 8, 9, 37, 1000, 1025}) {
    CpuSumTree tree(capacity);
    std::vector<double> p(capacity);
    for (std::size_t i = 0; i < capacity; ++i) {
      p[i] = (rng() % 4 == 0) ? 0.0 : static_cast<double>(1 + rng() % 100);
      tree.set(i, p[i]);
    }
    p[capacity - 1] = 3.0;
    tree.set(capacity - 1, 3.0);
    double cumulative = 0.0;
    for (std::size_t i = 0; i < capacity; ++i) {
      if (p[i] > 0.0) {
        EXPECT_EQ(tree.find_prefix_sum(cumulative + p[i] / 2), i) << "capacity " << capacity;
        EXPECT_EQ(tree.find_prefix_sum(cumulative), i) << "capacity " << capacity;
      }
      cumulative += p[i];
    }
    EXPECT_EQ(tree.total(), cumulative);
  }
}

TEST(CpuSumTree, SumMinMaxMatchBruteForceAfterRandomWrites) {
  std::mt19937_64 rng(12);
  const std::size_t capacity = 777;
  CpuSumTree tree(capacity);
  std::vector<double> p(capacity, 0.0);
  EXPECT_EQ(tree.total(), 0.0);
  EXPECT_EQ(tree.max(), 0.0);
  EXPECT_EQ(tree.min_positive(), std::numeric_limits<double>::infinity());
  std::uniform_real_distribution<double> exponent(-8.0, 4.0);
  for (int write = 0; write < 200000; ++write) {
    const std::size_t i = rng() % capacity;
    p[i] = (rng() % 10 == 0) ? 0.0 : std::pow(10.0, exponent(rng));
    tree.set(i, p[i]);
    if (write % 20000 == 0 || write == 199999) {
      long double sum = 0.0L;
      double min = std::numeric_limits<double>::infinity();
      double max = 0.0;
      for (double v : p) {
        sum += v;
        if (v > 0.0) min = std::fmin(min, v);
        max = std::fmax(max, v);
      }
      EXPECT_NEAR(tree.total(), static_cast<double>(sum), 1e-12 * static_cast<double>(sum));
      EXPECT_EQ(tree.min_positive(), min);
      EXPECT_EQ(tree.max(), max);
    }
  }
  for (std::size_t i = 0; i < capacity; ++i) EXPECT_EQ(tree.leaf(i), p[i]);
}

}  // namespace
