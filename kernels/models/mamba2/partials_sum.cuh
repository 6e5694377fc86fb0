// Block program of partials_sum (contract in partials_sum.h). Shared: kPartialThreads floats.
#pragma once

#include "kernels/models/mamba2/block_program.cuh"
#include "kernels/models/mamba2/partials_sum.h"

namespace resident::kernels::mamba2 {

template <class Block>
RESIDENT_HD void partials_sum_block(Block& block, const PartialsSumArgs& a, float* smem) {
  int s = 0;
  while (s + 1 < a.count && a.first_block[s + 1] <= static_cast<int>(block.index)) ++s;
  const PartialSegment& seg = a.segments[s];
  const int col0 = (static_cast<int>(block.index) - a.first_block[s]) * kPartialColumns;
  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < kPartialThreads; i += static_cast<int>(block.threads)) {
      const int c = col0 + i % kPartialColumns, lane = i / kPartialColumns;
      float acc = 0.0f;
      if (c < seg.cols)
        for (int r = lane; r < seg.rows; r += kPartialLanes)
          acc += seg.partials[static_cast<long long>(r) * seg.cols + c];
      smem[i] = acc;
    }
  });
  block.phase([&](unsigned tid) {
    for (int i = static_cast<int>(tid); i < kPartialColumns; i += static_cast<int>(block.threads)) {
      const int c = col0 + i;
      if (c >= seg.cols) continue;
      float sum = 0.0f;
      for (int lane = 0; lane < kPartialLanes; ++lane) sum += smem[lane * kPartialColumns + i];
      seg.dest[c] += sum;
    }
  });
}

}  // namespace resident::kernels::mamba2
