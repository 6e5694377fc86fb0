// CpuSumTree: the fp64 sum tree of prioritized replay, with a min tree and a max tree over
// the same leaves. O(log N) per leaf write, O(log N) per prefix-sum search, O(1) root queries.
//
// Layout: a complete binary tree of P = next power of two >= capacity leaves, heap-ordered
// (node 1 is the root, node n has children 2n and 2n+1, leaf i is node P + i). Leaves past
// `capacity` are padding with priority 0. Each internal node is recomputed from its two
// children on every write (never updated by deltas), so a node is always the fp64 sum of
// its children and the root cannot drift from the sum of the leaves.
#pragma once

#include <cstddef>
#include <vector>

namespace resident {

class CpuSumTree {
 public:
  // All leaves start at priority 0. capacity >= 1.
  explicit CpuSumTree(std::size_t capacity);

  // Sets leaf `leaf` (< capacity) to `priority` (finite, >= 0; the caller checks).
  void set(std::size_t leaf, double priority);

  double leaf(std::size_t leaf) const { return sum_[leaves_ + leaf]; }
  std::size_t capacity() const noexcept { return capacity_; }

  // Sum of all leaves (the root).
  double total() const noexcept { return sum_[1]; }
  // Smallest positive leaf; +inf when no leaf is positive.
  double min_positive() const noexcept { return min_positive_[1]; }
  // Largest leaf; 0 when all leaves are 0.
  double max() const noexcept { return max_[1]; }

  // The leaf whose half-open interval [c_{i-1}, c_i) holds `mass`, where c_i is the sum of
  // leaves 0..i: the first leaf whose cumulative sum exceeds `mass`. A mass exactly on a
  // boundary c_i therefore picks leaf i+1. The cumulative sums are those of the tree's own
  // fp64 additions (exact when the partial sums are representable). Never returns a leaf of
  // priority 0: a mass >= total() (possible after rounding) returns a positive leaf, the last
  // one when the partial sums are exact. Requires total() > 0 and mass >= 0.
  std::size_t find_prefix_sum(double mass) const;

 private:
  void pull(std::size_t node);

  std::size_t capacity_;
  std::size_t leaves_;                // P, a power of two >= capacity_
  std::vector<double> sum_;           // [2P], index 0 unused
  std::vector<double> min_positive_;  // [2P], +inf for leaves of priority 0
  std::vector<double> max_;           // [2P]
};

}  // namespace resident
