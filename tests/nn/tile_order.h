// The fixed summation order of kernels/nn/fused_step_phases.cuh's tile_product, on the host: the
// bit-for-bit references of the tile tests (tests/nn/fused_step_tile_test.cu) and of the fused
// DQN step's forward (tests/rl/dqn/dqn_train_step_fused_test.cu). Thread group g of kSlices sums
// k = kChunk q + kSliceK g .. kChunk q + kSliceK g + kSliceK - 1 over the chunks q ascending by
// fmaf (the whole slice: terms past K are 0 x 0), then the groups' sums are added as
// ((g0 + g1) + g2) + g3. The tile test checks these constants against the kernel's.
#pragma once

#include <array>
#include <cmath>

namespace resident::test::tile_order {

constexpr int kChunk = 64;
constexpr int kSlices = 4;
constexpr int kSliceK = kChunk / kSlices;

// The kSlices groups' sums of fmaf(a(k), b(k), .) for k < K in the order above (a and b return 0
// past K themselves, as the kernel's zero padding).
template <typename TermA, typename TermB>
std::array<float, kSlices> slice_sums(const TermA& a, const TermB& b, int K) {
  const int chunks = (K + kChunk - 1) / kChunk;
  std::array<float, kSlices> c{};
  for (int g = 0; g < kSlices; ++g)
    for (int q = 0; q < chunks; ++q)
      for (int kk = 0; kk < kSliceK; ++kk) {
        const int k = q * kChunk + g * kSliceK + kk;
        c[g] = std::fmaf(a(k), b(k), c[g]);
      }
  return c;
}

// The groups' sums added in the kernel's order.
inline float in_order(const std::array<float, kSlices>& c) { return ((c[0] + c[1]) + c[2]) + c[3]; }

}  // namespace resident::test::tile_order
