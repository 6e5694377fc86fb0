// CpuReplayBuffer allocates nothing in sample and update_priorities once the SampledBatch has
// the capacity for the batch: every heap allocation of this binary is counted.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <random>
#include <vector>

#include "lib/replay/cpu_replay_buffer.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

// Replacement global allocation functions (malloc/free based) that count every allocation.
// GCC pairs the inlined library operator new with these deletes and warns; the pairing is
// correct because both sides are replaced here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t bytes) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace {

using resident::CpuReplayBuffer;
using resident::ReplayConfig;
using resident::ReplayPriorityMode;
using resident::SampledBatch;

TEST(CpuReplayBufferAllocation, SampleAndUpdateAllocateNothingOnceTheOutputHasCapacity) {
  for (ReplayPriorityMode mode : {ReplayPriorityMode::Proportional, ReplayPriorityMode::Rank}) {
    ReplayConfig config;
    config.capacity = 4096;
    config.state_dim = 8;
    config.mode = mode;
    CpuReplayBuffer buffer(config);
    const std::vector<float> states(4096 * 8, 0.5f), rewards(4096, 1.0f);
    const std::vector<std::int32_t> actions(4096, 1);
    const std::vector<std::uint8_t> dones(4096, 0);
    buffer.insert_batch({states, actions, rewards, states, dones});
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<float> td_value(-2.0f, 2.0f);
    SampledBatch out;
    buffer.sample(256, rng, out);  // sizes the output
    std::vector<std::uint32_t> indices(256), generations(256);
    std::vector<float> td(256);
    const long before = g_allocations.load();
    for (int call = 0; call < 100; ++call) {
      buffer.sample(256, rng, out);
      for (std::size_t k = 0; k < 256; ++k) {
        indices[k] = out.indices[k];
        generations[k] = out.generations[k];
        td[k] = td_value(rng);
      }
      buffer.update_priorities(indices, generations, td);
    }
    const long allocations = g_allocations.load() - before;
    std::printf("%s: %ld allocations in 100 sample + update calls of 256\n",
                mode == ReplayPriorityMode::Rank ? "rank" : "proportional", allocations);
    EXPECT_EQ(allocations, 0);
  }
}

}  // namespace
