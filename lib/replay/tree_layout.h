// The leaf count of the replay sum trees (CPU and GPU share the layout): the next power of
// two >= capacity, so leaf i is heap node P + i.
#pragma once

#include <cstddef>

namespace resident {

constexpr std::size_t tree_leaf_count(std::size_t capacity) {
  std::size_t p = 1;
  while (p < capacity) p <<= 1;
  return p;
}

}  // namespace resident
