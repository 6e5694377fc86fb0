#include "lib/replay/cpu_sum_tree.h"

#include <cmath>
#include <limits>

#include "lib/replay/tree_layout.h"

namespace resident {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

CpuSumTree::CpuSumTree(std::size_t capacity)
    : capacity_(capacity),
      leaves_(tree_leaf_count(capacity)),
      sum_(2 * leaves_, 0.0),
      min_positive_(2 * leaves_, kInf),
      max_(2 * leaves_, 0.0) {}

void CpuSumTree::pull(std::size_t node) {
  const std::size_t left = 2 * node;
  sum_[node] = sum_[left] + sum_[left + 1];
  min_positive_[node] = std::fmin(min_positive_[left], min_positive_[left + 1]);
  max_[node] = std::fmax(max_[left], max_[left + 1]);
}

void CpuSumTree::set(std::size_t leaf, double priority) {
  std::size_t node = leaves_ + leaf;
  sum_[node] = priority;
  min_positive_[node] = priority > 0.0 ? priority : kInf;
  max_[node] = priority;
  for (node >>= 1; node >= 1; node >>= 1) pull(node);
}

std::size_t CpuSumTree::find_prefix_sum(double mass) const {
  std::size_t node = 1;
  while (node < leaves_) {
    const std::size_t left = 2 * node;
    if (mass < sum_[left]) {
      node = left;
    } else if (sum_[left + 1] > 0.0) {
      mass -= sum_[left];
      node = left + 1;
    } else {
      node = left;  // mass past this subtree's total by rounding: stay on its positive side
    }
  }
  return node - leaves_;
}

}  // namespace resident
