#include "lib/replay/cpu_rank_order.h"

namespace resident {

namespace {
// splitmix64's finalizer: a bijection of 64-bit integers, so distinct slots get distinct keys.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

CpuRankOrder::CpuRankOrder(std::size_t capacity)
    : priority_(capacity, 0.0),
      heap_key_(capacity),
      left_(capacity, kNil),
      right_(capacity, kNil),
      count_(capacity, 0),
      in_set_(capacity, 0) {
  for (std::size_t s = 0; s < capacity; ++s) heap_key_[s] = mix(s);
}

void CpuRankOrder::pull(std::uint32_t node) {
  std::uint32_t count = 1;
  if (left_[node] != kNil) count += count_[left_[node]];
  if (right_[node] != kNil) count += count_[right_[node]];
  count_[node] = count;
}

void CpuRankOrder::split(std::uint32_t tree, std::uint32_t slot, std::uint32_t& left,
                         std::uint32_t& right) {
  if (tree == kNil) {
    left = right = kNil;
    return;
  }
  if (ranks_before(tree, slot)) {
    split(right_[tree], slot, right_[tree], right);
    left = tree;
  } else {
    split(left_[tree], slot, left, left_[tree]);
    right = tree;
  }
  pull(tree);
}

std::uint32_t CpuRankOrder::merge(std::uint32_t left, std::uint32_t right) {
  if (left == kNil) return right;
  if (right == kNil) return left;
  if (heap_key_[left] > heap_key_[right]) {
    right_[left] = merge(right_[left], right);
    pull(left);
    return left;
  }
  left_[right] = merge(left, left_[right]);
  pull(right);
  return right;
}

std::uint32_t CpuRankOrder::insert_below(std::uint32_t tree, std::uint32_t slot) {
  if (tree == kNil) return slot;
  if (heap_key_[slot] > heap_key_[tree]) {
    split(tree, slot, left_[slot], right_[slot]);
    pull(slot);
    return slot;
  }
  if (ranks_before(slot, tree))
    left_[tree] = insert_below(left_[tree], slot);
  else
    right_[tree] = insert_below(right_[tree], slot);
  pull(tree);
  return tree;
}

std::uint32_t CpuRankOrder::erase_below(std::uint32_t tree, std::uint32_t slot) {
  if (tree == slot) return merge(left_[slot], right_[slot]);
  if (ranks_before(slot, tree))
    left_[tree] = erase_below(left_[tree], slot);
  else
    right_[tree] = erase_below(right_[tree], slot);
  pull(tree);
  return tree;
}

void CpuRankOrder::insert(std::uint32_t slot, double priority) {
  priority_[slot] = priority;
  left_[slot] = right_[slot] = kNil;
  count_[slot] = 1;
  in_set_[slot] = 1;
  root_ = insert_below(root_, slot);
}

void CpuRankOrder::erase(std::uint32_t slot) {
  root_ = erase_below(root_, slot);
  in_set_[slot] = 0;
  left_[slot] = right_[slot] = kNil;
  count_[slot] = 0;
}

std::uint32_t CpuRankOrder::slot_at_rank(std::size_t rank) const {
  std::uint32_t node = root_;
  for (;;) {
    const std::size_t left_count = left_[node] == kNil ? 0 : count_[left_[node]];
    if (rank <= left_count) {
      node = left_[node];
    } else if (rank == left_count + 1) {
      return node;
    } else {
      rank -= left_count + 1;
      node = right_[node];
    }
  }
}

std::size_t CpuRankOrder::rank_of(std::uint32_t slot) const {
  std::size_t before = 0;
  std::uint32_t node = root_;
  while (node != slot) {
    if (ranks_before(slot, node)) {
      node = left_[node];
    } else {
      before += 1 + (left_[node] == kNil ? 0 : count_[left_[node]]);
      node = right_[node];
    }
  }
  return before + (left_[slot] == kNil ? 0 : count_[left_[slot]]) + 1;
}

}  // namespace resident
