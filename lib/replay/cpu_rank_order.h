// CpuRankOrder: an order-statistic set of replay slots for rank-based prioritized replay.
// Slots are ordered by (priority descending, slot ascending): rank 1 is the largest priority,
// and equal priorities rank by slot index, the lower slot first.
//
// A treap whose node ids are the slot ids (no allocation after construction). Heap keys are a
// fixed bijective hash of the slot, so the shape depends only on the set of keys and every
// run is reproducible. Expected O(log N) per insert, erase, rank_of and slot_at_rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace resident {

class CpuRankOrder {
 public:
  // An empty set over slots [0, capacity). capacity < 2^32 - 1.
  explicit CpuRankOrder(std::size_t capacity);

  // Adds `slot` with `priority`; the slot must not be in the set.
  void insert(std::uint32_t slot, double priority);
  // Removes `slot`; the slot must be in the set.
  void erase(std::uint32_t slot);

  bool contains(std::uint32_t slot) const { return in_set_[slot] != 0; }
  std::size_t size() const { return root_ == kNil ? 0 : count_[root_]; }

  // The slot of rank `rank`, 1 <= rank <= size().
  std::uint32_t slot_at_rank(std::size_t rank) const;
  // The rank (1-based) of `slot`, which must be in the set.
  std::size_t rank_of(std::uint32_t slot) const;

 private:
  static constexpr std::uint32_t kNil = 0xFFFFFFFFu;

  // True when slot a ranks before slot b.
  bool ranks_before(std::uint32_t a, std::uint32_t b) const {
    return priority_[a] > priority_[b] || (priority_[a] == priority_[b] && a < b);
  }
  void pull(std::uint32_t node);
  std::uint32_t insert_below(std::uint32_t tree, std::uint32_t slot);
  std::uint32_t erase_below(std::uint32_t tree, std::uint32_t slot);
  // Splits `tree` into the slots ranking before `slot` (left) and after it (right).
  void split(std::uint32_t tree, std::uint32_t slot, std::uint32_t& left, std::uint32_t& right);
  // Joins two trees where every slot of `left` ranks before every slot of `right`.
  std::uint32_t merge(std::uint32_t left, std::uint32_t right);

  std::vector<double> priority_;
  std::vector<std::uint64_t> heap_key_;
  std::vector<std::uint32_t> left_;
  std::vector<std::uint32_t> right_;
  std::vector<std::uint32_t> count_;  // slots in the subtree rooted here
  std::vector<std::uint8_t> in_set_;
  std::uint32_t root_ = kNil;
};

}  // namespace resident
