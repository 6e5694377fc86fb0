// Philox: the CPU reference against the published Random123 known-answer vectors, then the
// device helper (cuRAND Philox4x32-10 behind resident::PhiloxKey) against the reference on
// random seeds, subsequences and offsets; and PhiloxStream's bookkeeping.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/core/philox.cuh"
#include "kernels/core/philox.h"
#include "lib/core/device_buffer.h"
#include "tests/reference/philox_reference.h"
#include "tests/support/gpu.h"

namespace {

using resident::reference::philox4x32_10;

TEST(PhiloxReference, MatchesRandom123KnownAnswers) {
  // Random123 kat_vectors, philox4x32 with 10 rounds.
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (resident::reference::PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                          {0xffffffffu, 0xffffffffu}),
            (resident::reference::PhiloxCounter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          {0xa4093822u, 0x299f31d0u}),
            (resident::reference::PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(PhiloxStream, OffsetsAdvanceInWholeBlocksAndStreamsDiffer) {
  resident::PhiloxStream a(42, 0);
  resident::PhiloxStream b(42, 1);
  EXPECT_NE(a.next(1).seed, b.next(1).seed);
  EXPECT_EQ(a.offset(), 4u);
  EXPECT_EQ(a.next(5).offset, 4u);
  EXPECT_EQ(a.offset(), 12u);
  a.set_offset(100);
  EXPECT_EQ(a.next(0).offset, 100u);
}

constexpr int kDraws = 7;

__global__ void draw_words(std::uint32_t* out, resident::PhiloxKey key, int elements) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= elements) return;
  curandStatePhilox4_32_10_t state = resident::kernels::philox_state(key, e);
  for (int d = 0; d < kDraws; ++d) out[e * kDraws + d] = curand(&state);
}

TEST(PhiloxDevice, MatchesTheCpuReferenceStreamLayout) {
  RESIDENT_REQUIRE_GPU();
  std::mt19937_64 rng(20261130);
  const int elements = 333;
  resident::DeviceBuffer<std::uint32_t> out(elements * kDraws);
  for (int trial = 0; trial < 4; ++trial) {
    const resident::PhiloxKey key{rng(), rng() % 1000};
    ASSERT_EQ(cudaMemset(out.data(), 0xFF, out.bytes()), cudaSuccess);  // poison
    draw_words<<<(elements + 127) / 128, 128>>>(out.data(), key, elements);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    const std::vector<std::uint32_t> got = out.download();
    for (int e = 0; e < elements; ++e)
      for (int d = 0; d < kDraws; ++d)
        ASSERT_EQ(got[e * kDraws + d],
                  resident::reference::curand_philox_draw(key.seed, e, key.offset, d))
            << "trial " << trial << " element " << e << " draw " << d;
  }
}

}  // namespace
