// ScratchArena: sizing, 256-byte alignment, exhaustion error, and that carved regions do not
// overlap (each is filled on the device with its own pattern and read back intact).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "lib/core/scratch_arena.h"
#include "tests/support/gpu.h"

namespace {

using resident::align_up;
using resident::ScratchArena;
using resident::ScratchPlan;

TEST(ScratchPlan, RoundsEachRequestUpTo256Bytes) {
  ScratchPlan plan;
  plan.add_bytes(1).add_bytes(256).add_bytes(257).add<float>(3).add_bytes(0);
  EXPECT_EQ(plan.bytes(), 256u + 256u + 512u + 256u);
  EXPECT_EQ(align_up(0), 0u);
  EXPECT_EQ(align_up(255), 256u);
}

__global__ void fill_pattern(std::uint32_t* out, std::size_t count, std::uint32_t tag) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < count) out[i] = tag * 1000003u + static_cast<std::uint32_t>(i);
}

TEST(ScratchArena, RegionsAreAlignedAndDisjoint) {
  RESIDENT_REQUIRE_GPU();
  const std::vector<std::size_t> counts = {1, 63, 64, 65, 1000, 4099};
  ScratchPlan plan;
  for (std::size_t c : counts) plan.add<std::uint32_t>(c);
  ScratchArena arena(plan.bytes());
  std::vector<std::uint32_t*> regions;
  for (std::size_t c : counts) {
    std::uint32_t* p = arena.take<std::uint32_t>(c);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0u);
    regions.push_back(p);
  }
  EXPECT_EQ(arena.used(), plan.bytes());
  for (std::size_t r = 0; r < counts.size(); ++r) {
    fill_pattern<<<static_cast<unsigned>((counts[r] + 255) / 256), 256>>>(
        regions[r], counts[r], static_cast<std::uint32_t>(r + 1));
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  }
  for (std::size_t r = 0; r < counts.size(); ++r) {
    std::vector<std::uint32_t> host(counts[r], 0xFFFFFFFFu);
    ASSERT_EQ(cudaMemcpy(host.data(), regions[r], counts[r] * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (std::size_t i = 0; i < counts[r]; ++i)
      ASSERT_EQ(host[i], static_cast<std::uint32_t>(r + 1) * 1000003u + i) << "region " << r;
  }
}

TEST(ScratchArena, ExhaustionThrowsNamingTheRequestAndWhatIsLeft) {
  RESIDENT_REQUIRE_GPU();
  ScratchArena arena(1024);
  arena.take_bytes(700);  // takes 768
  try {
    arena.take_bytes(300);
    FAIL() << "took 300 bytes with 256 left";
  } catch (const resident::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("take_bytes(300)"), std::string::npos) << what;
    EXPECT_NE(what.find("256 of 1024 bytes left"), std::string::npos) << what;
  }
  arena.reset();
  EXPECT_NO_THROW(arena.take_bytes(1024));
}

}  // namespace
