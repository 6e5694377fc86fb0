// Grid size of a grid-stride launch: enough blocks of `block` threads to cover n items, capped
// (the kernel's grid-stride loop covers the rest). Host-side helper of the launchers.
#pragma once

#include <algorithm>
#include <cstddef>

namespace resident::kernels {

inline unsigned grid_stride_blocks(std::size_t n, unsigned block, unsigned max_blocks = 65535) {
  return static_cast<unsigned>(std::min<std::size_t>((n + block - 1) / block, max_blocks));
}

}  // namespace resident::kernels
