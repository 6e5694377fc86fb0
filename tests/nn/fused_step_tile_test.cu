// The fused steps' tile product (kernels/nn/fused_step_phases.cuh: tile_product) bit for bit
// against a CPU emulation of its documented order: thread group g of 4 sums k = 64 q + 16 g ..
// 64 q + 16 g + 15 over the chunks q ascending with fmaf, then the groups' sums are added as
// ((g0 + g1) + g2) + g3; with row sums the same for A's rows. Fresh random operands, outputs
// poisoned (NaN) first. One 29 x 31 tile (ragged edges) for K from 1 to 1100 (one chunk, a
// partial chunk, four chunks, many chunks, a partial last chunk), in the four operand layouts
// back to back in one block, so each layout reuses the shared chunks the previous one filled.
// And the forward phases' two-sub-tile tile (64 x 32, both operands k-contiguous) with 61 x 31
// live outputs (its second sub-tile ragged) for the same K: the same order, so the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/nn/fused_step_phases.cuh"
#include "lib/core/device_buffer.h"
#include "tests/nn/nn_test_support.h"
#include "tests/nn/tile_order.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident;
namespace fs = resident::kernels::fused_step;

constexpr int kRows = 29, kCols = 31;  // the tile's live outputs (of 32 x 32)
constexpr int kOutputs = 32 * 32 + 32;  // per layout: C, then the row sums

// Layout v: A k-contiguous for v = 0, 2; B k-contiguous for v = 0, 3; row sums for v = 1, 3.
template <bool kA, bool kB, bool kRowSums>
__device__ void tile_into(fs::Chunks& s, const float* a, const float* b, int K,
                          float* out) {
  const fs::TileSums r = fs::tile_product<kA, kB, kRowSums>(
      s, {a, kA ? K : kRows, kRows}, {b, kB ? K : kCols, kCols}, K, 0, 0);
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) out[(2 * ty + i) * 32 + 2 * tx + j] = r.c[i][j];
    if (kRowSums && tx == 0) out[1024 + 2 * ty + i] = r.row_sum[i];
  }
}

__global__ void __launch_bounds__(fs::kThreads)
    four_layouts(const float* a, const float* b, int K, float* out) {
  __shared__ fs::Chunks s;
  tile_into<true, true, false>(s, a, b, K, out);
  tile_into<false, false, true>(s, a, b, K, out + kOutputs);
  tile_into<true, false, false>(s, a, b, K, out + 2 * kOutputs);
  tile_into<false, true, true>(s, a, b, K, out + 3 * kOutputs);
}

constexpr int kPairRows = 61;  // the pair's live rows (of 64)

__global__ void __launch_bounds__(fs::kThreads)
    pair_tile(const float* a, const float* b, int K, float* out) {
  __shared__ fs::ChunksOf<2> s;
  const fs::TileSumsOf<2> r =
      fs::tile_product<true, true, false>(s, {a, K, kPairRows}, {b, K, kCols}, K, 0, 0);
  const int tx = threadIdx.x % 16;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) out[fs::tile_row(i) * 32 + 2 * tx + j] = r.c[i][j];
}

bool same_bits(float x, float y) { return std::memcmp(&x, &y, sizeof(float)) == 0; }

namespace order = test::tile_order;
static_assert(order::kChunk == fs::kChunk && order::kSlices == fs::kSlices &&
                  order::kSliceK == fs::kSliceK,
              "tests/nn/tile_order.h describes tile_product's chunks and slices");

// C(i, j) in the documented order for A(i, k), B(j, k) (0 outside the matrices).
template <typename OperandA, typename OperandB>
float product_in_order(const OperandA& A, const OperandB& B, int i, int j, int K) {
  return order::in_order(order::slice_sums([&](int k) { return A(i, k); },
                                           [&](int k) { return B(j, k); }, K));
}

TEST(FusedStepTile, ProductsMatchTheDocumentedOrderBitForBit) {
  RESIDENT_REQUIRE_GPU();
  std::mt19937_64 rng(20261130);
  for (const int K : {1, 17, 64, 65, 128, 200, 256, 257, 320, 512, 777, 1100}) {
    const std::vector<float> a = test::nn_support::random_floats(32 * K, -1.0f, 1.0f, rng);
    const std::vector<float> b = test::nn_support::random_floats(32 * K, -1.0f, 1.0f, rng);
    DeviceBuffer<float> d_a(a.size()), d_b(b.size()), d_out(4 * kOutputs);
    d_a.upload(a);
    d_b.upload(b);
    d_out.upload(test::nn_support::nans(d_out.size()));
    four_layouts<<<1, fs::kThreads>>>(d_a.data(), d_b.data(), K, d_out.data());
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> out = d_out.download();
    for (int v = 0; v < 4; ++v) {
      const bool a_k = v == 0 || v == 2, b_k = v == 0 || v == 3, row_sums = v % 2 == 1;
      const auto A = [&](int i, int k) {
        return i < kRows && k < K ? a[a_k ? i * K + k : k * kRows + i] : 0.0f;
      };
      const auto B = [&](int j, int k) {
        return j < kCols && k < K ? b[b_k ? j * K + k : k * kCols + j] : 0.0f;
      };
      int mismatches = 0;
      std::string first;
      for (int i = 0; i < 32; ++i) {
        for (int j = 0; j < 32; ++j) {
          const float want = product_in_order(A, B, i, j, K);
          if (!same_bits(want, out[v * kOutputs + i * 32 + j]) && mismatches++ == 0)
            first = "C(" + std::to_string(i) + ", " + std::to_string(j) + ") = " +
                    std::to_string(out[v * kOutputs + i * 32 + j]) + ", want " +
                    std::to_string(want);
        }
        // A row sum's terms add exactly as fmaf(A, 1, .) does: one rounding of A + sum.
        const float want = order::in_order(
            order::slice_sums([&](int k) { return A(i, k); }, [](int) { return 1.0f; }, K));
        if (row_sums && !same_bits(want, out[v * kOutputs + 1024 + i]) && mismatches++ == 0)
          first = "row sum " + std::to_string(i);
      }
      EXPECT_EQ(mismatches, 0) << "K " << K << ", layout " << v << ": first " << first;
    }
  }
}

TEST(FusedStepTile, PairProductsMatchTheDocumentedOrderBitForBit) {
  RESIDENT_REQUIRE_GPU();
  std::mt19937_64 rng(20261201);
  for (const int K : {1, 17, 64, 65, 128, 200, 256, 257, 320, 512, 777, 1100}) {
    const std::vector<float> a = test::nn_support::random_floats(kPairRows * K, -1.0f, 1.0f, rng);
    const std::vector<float> b = test::nn_support::random_floats(kCols * K, -1.0f, 1.0f, rng);
    DeviceBuffer<float> d_a(a.size()), d_b(b.size()), d_out(64 * 32);
    d_a.upload(a);
    d_b.upload(b);
    d_out.upload(test::nn_support::nans(d_out.size()));
    pair_tile<<<1, fs::kThreads>>>(d_a.data(), d_b.data(), K, d_out.data());
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> out = d_out.download();
    const auto A = [&](int i, int k) { return i < kPairRows && k < K ? a[i * K + k] : 0.0f; };
    const auto B = [&](int j, int k) { return j < kCols && k < K ? b[j * K + k] : 0.0f; };
    int mismatches = 0;
    std::string first;
    for (int i = 0; i < 64; ++i)
      for (int j = 0; j < 32; ++j) {
        const float want = product_in_order(A, B, i, j, K);
        if (!same_bits(want, out[i * 32 + j]) && mismatches++ == 0)
          first = "C(" + std::to_string(i) + ", " + std::to_string(j) + ") = " +
                  std::to_string(out[i * 32 + j]) + ", want " + std::to_string(want);
      }
    EXPECT_EQ(mismatches, 0) << "K " << K << ": first " << first;
  }
}

}  // namespace
