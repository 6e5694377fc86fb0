// Parameter gradients from per-block partials (partials_sum.cu): for each segment s,
//   dest_s[c] += sum over r = 0..rows_s-1 of partials_s[r, c]   (c < cols_s)
// in a fixed order (8 interleaved row lanes, then the lanes in order), so the sum is the same
// bits on every run. Up to kMaxPartialSegments segments per launch; the launcher splits longer
// lists over several launches. Accumulates into dest (the slab's grads); capturable.
#pragma once

#include <cuda_runtime_api.h>

#include <span>

namespace resident::kernels::mamba2 {

inline constexpr int kMaxPartialSegments = 32;
inline constexpr int kPartialColumns = 32;  // columns per block
inline constexpr int kPartialLanes = 8;     // row lanes per block
inline constexpr int kPartialThreads = kPartialColumns * kPartialLanes;

struct PartialSegment {
  const float* partials = nullptr;  // [rows, cols]
  float* dest = nullptr;            // [cols]
  int rows = 0;
  int cols = 0;
};

struct PartialsSumArgs {
  PartialSegment segments[kMaxPartialSegments];
  int first_block[kMaxPartialSegments + 1] = {};  // block ranges per segment
  int count = 0;
};

// Fills first_block from the segments' widths; returns the grid size.
inline int partials_sum_plan(PartialsSumArgs& args) {
  args.first_block[0] = 0;
  for (int s = 0; s < args.count; ++s)
    args.first_block[s + 1] =
        args.first_block[s] + (args.segments[s].cols + kPartialColumns - 1) / kPartialColumns;
  return args.first_block[args.count];
}

void launch_partials_sum(std::span<const PartialSegment> segments, cudaStream_t stream);

}  // namespace resident::kernels::mamba2
