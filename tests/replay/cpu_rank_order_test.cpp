// CpuRankOrder: rank_of and slot_at_rank against a sorted copy, under random inserts, erases
// and re-inserts with many tied priorities.
#include "lib/replay/cpu_rank_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using resident::CpuRankOrder;

TEST(CpuRankOrder, TiesRankByLowerSlotFirst) {
  CpuRankOrder order(6);
  order.insert(4, 1.0);
  order.insert(1, 1.0);
  order.insert(5, 3.0);
  order.insert(0, 0.5);
  order.insert(2, 1.0);
  // 5 (3.0), then 1, 2, 4 (1.0, by slot), then 0 (0.5)
  const std::vector<std::uint32_t> expected = {5, 1, 2, 4, 0};
  ASSERT_EQ(order.size(), 5u);
  for (std::size_t r = 1; r <= expected.size(); ++r) {
    EXPECT_EQ(order.slot_at_rank(r), expected[r - 1]) << "rank " << r;
    EXPECT_EQ(order.rank_of(expected[r - 1]), r);
  }
  EXPECT_FALSE(order.contains(3));
}

TEST(CpuRankOrder, MatchesASortedCopyUnderRandomChanges) {
  std::mt19937_64 rng(21);
  const std::size_t capacity = 1500;
  CpuRankOrder order(capacity);
  std::vector<double> priority(capacity, 0.0);
  std::vector<bool> present(capacity, false);
  std::size_t checks = 0;
  for (int op = 0; op < 60000; ++op) {
    const auto slot = static_cast<std::uint32_t>(rng() % capacity);
    if (present[slot]) {
      order.erase(slot);
      present[slot] = false;
    }
    if (rng() % 5 != 0) {
      priority[slot] = static_cast<double>(rng() % 50);  // many ties
      order.insert(slot, priority[slot]);
      present[slot] = true;
    }
    if (op % 6000 == 5999) {
      std::vector<std::uint32_t> sorted;
      for (std::uint32_t s = 0; s < capacity; ++s)
        if (present[s]) sorted.push_back(s);
      std::sort(sorted.begin(), sorted.end(), [&](std::uint32_t a, std::uint32_t b) {
        return priority[a] > priority[b] || (priority[a] == priority[b] && a < b);
      });
      ASSERT_EQ(order.size(), sorted.size());
      for (std::size_t r = 1; r <= sorted.size(); ++r) {
        ASSERT_EQ(order.slot_at_rank(r), sorted[r - 1]) << "rank " << r << " op " << op;
        ASSERT_EQ(order.rank_of(sorted[r - 1]), r);
        ++checks;
      }
      for (std::uint32_t s = 0; s < capacity; ++s) EXPECT_EQ(order.contains(s), present[s]);
    }
  }
  EXPECT_GT(checks, 10000u);
}

}  // namespace
