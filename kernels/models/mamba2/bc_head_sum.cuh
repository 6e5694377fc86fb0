// Block program of bc_head_sum (contract in bc_head_sum.h): block `index` owns elements
// [index * threads, +threads) of the rows * width outputs. No shared memory.
#pragma once

#include "kernels/models/mamba2/bc_head_sum.h"
#include "kernels/models/mamba2/block_program.cuh"

namespace resident::kernels::mamba2 {

template <class Block>
RESIDENT_HD void bc_head_sum_block(Block& block, const BcHeadSumArgs& a) {
  block.phase([&](unsigned tid) {
    const long long i = static_cast<long long>(block.index) * block.threads + tid;
    const long long total = static_cast<long long>(a.rows) * a.width;
    if (i >= total) return;
    const long long row = i / a.width;
    const int j = static_cast<int>(i % a.width);
    float s = 0.0f;
    for (int h = 0; h < a.heads; ++h) s += a.dbc_heads[static_cast<long long>(h) * total + i];
    a.dxbc[row * a.stride + a.col0 + j] = s;
  });
}

inline int bc_head_sum_blocks(const BcHeadSumArgs& a) {
  const long long total = static_cast<long long>(a.rows) * a.width;
  return static_cast<int>((total + kBcHeadSumThreads - 1) / kBcHeadSumThreads);
}

}  // namespace resident::kernels::mamba2
