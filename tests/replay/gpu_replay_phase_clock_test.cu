// The phase clocks of the proportional draw and of the priority update (diagnostics,
// GpuReplayBuffer::record_phase_times) at the PER bench's shape: capacity 2^20, state_dim 64,
// B = 256, a sample and an update per step. Checks that every launch writes each of the readings
// its launcher documents (the arrays are zeroed first: a reading not written fails), rising, and
// that a buffer with the clocks on ends bit for bit where one without them does; prints the
// median of each phase over 50 steps (where the PER step's time goes inside its two kernels).
// The two buffers run one after the other, never together.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/replay/gpu_replay_buffer.h"
#include "tests/support/gpu.h"
#include "tests/support/phase_clock.h"

namespace {

using namespace resident;

constexpr std::size_t kCapacity = std::size_t{1} << 20;  // tree depth 20: four groups of five
constexpr std::size_t kDim = 64;
constexpr std::size_t kBatch = 256;
constexpr int kDepth = 20;
constexpr int kGroups = (kDepth + 4) / 5;
constexpr std::size_t kDrawReadings = 6 + kGroups;        // replay_kernels.h
constexpr std::size_t kUpdateReadings = 6 + 2 * kGroups;  // replay_kernels.h

ReplayConfig config(std::size_t capacity = kCapacity) {
  ReplayConfig c;
  c.capacity = capacity;
  c.state_dim = kDim;
  return c;
}

// The readings of one launch: `needed` values and a sentinel after them, all zeroed
// (%globaltimer never reads 0). check() fails unless every reading was written and the sentinel
// was not (the kernel wrote exactly `needed`).
struct Readings {
  std::size_t needed;
  DeviceBuffer<std::uint64_t> values;
  explicit Readings(std::size_t n) : needed(n), values(n + 1) {}
  std::span<std::uint64_t> span() { return {values.data(), needed}; }
  void zero() { values.upload(std::vector<std::uint64_t>(needed + 1, 0)); }
  std::vector<std::uint64_t> check(const char* which) const {
    std::vector<std::uint64_t> t = values.download();
    for (std::size_t i = 0; i < needed; ++i)
      EXPECT_NE(t[i], 0u) << which << " reading " << i << " not written";
    EXPECT_EQ(t[needed], 0u) << which << ": a reading past the documented " << needed;
    t.resize(needed);
    return t;
  }
};

// Random rows on the device, inserted `kCapacity / rows` times (the same rows in every copy).
struct Rows {
  static constexpr std::size_t kRows = std::size_t{1} << 16;
  DeviceBuffer<float> states{kRows * kDim}, next_states{kRows * kDim}, rewards{kRows};
  DeviceBuffer<std::int32_t> actions{kRows};
  DeviceBuffer<std::uint8_t> dones{kRows};
  explicit Rows(std::mt19937& rng) {
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> s(kRows * kDim), r(kRows);
    for (float& x : s) x = value(rng);
    for (float& x : r) x = value(rng);
    states.upload(s);
    for (float& x : s) x = value(rng);
    next_states.upload(s);
    rewards.upload(r);
    actions.upload(std::vector<std::int32_t>(kRows, 1));
    dones.upload(std::vector<std::uint8_t>(kRows, 0));
  }
  void fill(GpuReplayBuffer& buffer) const {
    for (std::size_t done = 0; done < kCapacity; done += kRows)
      buffer.insert_batch({states.data(), actions.data(), rewards.data(), next_states.data(),
                           dones.data()},
                          kRows);
  }
};

std::vector<std::string> draw_phase_names() {
  std::vector<std::string> names{"entry to the prior kernel's end", "mass (step, total, u)"};
  for (int g = 0; g < kGroups; ++g)
    names.push_back("descent to height " + std::to_string(kDepth - 5 * (g + 1)));
  names.insert(names.end(),
               {"row copy (+ generation, weight)", "outputs (index, generation, weight)",
                "end (the draw warp exits; its block's step warp advances the step)"});
  return names;
}

std::vector<std::string> update_phase_names() {
  std::vector<std::string> names{"entry to the prior kernel's end",
                                 "classify (entries, pow, generation)", "claim (hash table)",
                                 "owners, leaf writes"};
  for (int g = 0; g < kGroups; ++g) {
    const std::string height = std::to_string(5 * (g + 1));
    names.push_back("barrier before height " + height);
    names.push_back("recompute height " + height);
  }
  names.push_back("end (counters)");
  return names;
}

TEST(GpuReplayPhaseClock, ReadingsRiseAndTheClocksChangeNothing) {
  RESIDENT_REQUIRE_GPU();
  std::mt19937 rng(2026);
  const Rows rows(rng);
  std::vector<float> td(kBatch);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& t : td) t = normal(rng);
  DeviceBuffer<float> td_errors(kBatch);
  td_errors.upload(td);

  Stream clocked_stream, plain_stream;
  GpuReplayBuffer clocked(config(), kBatch, 9, clocked_stream.get());
  GpuReplayBuffer plain(config(), kBatch, 9, plain_stream.get());
  rows.fill(clocked);
  rows.fill(plain);
  ASSERT_EQ(clocked.draw_phase_readings(), kDrawReadings);
  ASSERT_EQ(clocked.update_phase_readings(), kUpdateReadings);
  Readings draw_times(kDrawReadings), update_times(kUpdateReadings);
  std::vector<std::vector<double>> draw_phases(kDrawReadings - 1),
      update_phases(kUpdateReadings - 1);
  constexpr int kWarmUp = 10, kSteps = 60;
  std::vector<std::uint32_t> clocked_last, plain_last;
  for (int s = 0; s < kSteps; ++s) {
    const bool timed = s >= kWarmUp;
    if (timed) {
      draw_times.zero();
      update_times.zero();
    }
    clocked.record_phase_times(timed ? draw_times.span() : std::span<std::uint64_t>(),
                               timed ? update_times.span() : std::span<std::uint64_t>());
    const DeviceSampledBatch a = clocked.sample(kBatch);
    clocked.update_priorities(a.indices, a.generations, td_errors.data(), kBatch);
    clocked_stream.synchronize();
    const DeviceSampledBatch b = plain.sample(kBatch);
    plain.update_priorities(b.indices, b.generations, td_errors.data(), kBatch);
    plain_stream.synchronize();
    if (s == kSteps - 1) {
      clocked_last.resize(kBatch);
      plain_last.resize(kBatch);
      RESIDENT_CUDA_CHECK(cudaMemcpy(clocked_last.data(), a.indices,
                                     kBatch * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
      RESIDENT_CUDA_CHECK(cudaMemcpy(plain_last.data(), b.indices,
                                     kBatch * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
    }
    if (!timed) continue;
    const std::vector<std::uint64_t> draw = draw_times.check("draw");
    const std::vector<std::uint64_t> update = update_times.check("update");
    ASSERT_FALSE(HasFailure()) << "step " << s;
    ASSERT_EQ(test::phase_clock::add_phase_durations(draw, draw_phases), "") << "draw, step " << s;
    ASSERT_EQ(test::phase_clock::add_phase_durations(update, update_phases), "")
        << "update, step " << s;
  }
  EXPECT_EQ(clocked_last, plain_last) << "the clocked buffer drew other slots";
  EXPECT_EQ(clocked.read_tree_sums(), plain.read_tree_sums()) << "the clocked tree differs";
  std::printf("  draw (sample_proportional, draw 0's lane 0), capacity 2^20, B = 256:\n");
  test::phase_clock::print_phase_medians(draw_phases, draw_phase_names());
  std::printf("  update (update_priorities, block 0's thread 0):\n");
  test::phase_clock::print_phase_medians(update_phases, update_phase_names());
}

// Other shapes: a depth that is not a multiple of five (2^7 leaves: a top group of two levels,
// then one of five), an update of 2048 entries (two chunks: only the first is timed), and the
// refusal of arrays of the wrong size.
TEST(GpuReplayPhaseClock, ReadingCountsFollowTheTreeAndTwoChunkUpdates) {
  RESIDENT_REQUIRE_GPU();
  constexpr std::size_t kSmall = 128, kEntries = 2048;
  std::mt19937 rng(7);
  const Rows rows(rng);
  Stream stream;
  GpuReplayBuffer buffer(config(kSmall), 64, 3, stream.get());
  buffer.insert_batch({rows.states.data(), rows.actions.data(), rows.rewards.data(),
                       rows.next_states.data(), rows.dones.data()},
                      kSmall);
  ASSERT_EQ(buffer.draw_phase_readings(), 6u + 2u);    // ceil(7 / 5) = 2 groups
  ASSERT_EQ(buffer.update_phase_readings(), 6u + 4u);
  Readings draw_times(buffer.draw_phase_readings()), update_times(buffer.update_phase_readings());
  EXPECT_THROW(buffer.record_phase_times({draw_times.values.data(), draw_times.needed + 1}, {}),
               Error);
  EXPECT_THROW(buffer.record_phase_times({}, {update_times.values.data(), 3}), Error);
  draw_times.zero();
  update_times.zero();
  buffer.record_phase_times(draw_times.span(), update_times.span());
  const DeviceSampledBatch drawn = buffer.sample(64);
  stream.synchronize();  // the cudaMemcpy below does not wait for this non-blocking stream
  std::vector<std::uint32_t> slots(kEntries), generations(kEntries);
  std::vector<float> td(kEntries);
  std::uniform_real_distribution<float> magnitude(0.1f, 2.0f);
  const std::vector<std::uint32_t> drawn_generations = [&] {
    std::vector<std::uint32_t> g(64);
    RESIDENT_CUDA_CHECK(cudaMemcpy(g.data(), drawn.generations, 64 * sizeof(std::uint32_t),
                                   cudaMemcpyDeviceToHost));
    return g;
  }();
  for (std::size_t e = 0; e < kEntries; ++e) {
    slots[e] = static_cast<std::uint32_t>(rng() % kSmall);
    generations[e] = drawn_generations[0];  // every slot was written once: the same generation
    td[e] = magnitude(rng);
  }
  DeviceBuffer<std::uint32_t> d_slots(kEntries), d_generations(kEntries);
  DeviceBuffer<float> d_td(kEntries);
  d_slots.upload(slots);
  d_generations.upload(generations);
  d_td.upload(td);
  buffer.update_priorities(d_slots.data(), d_generations.data(), d_td.data(), kEntries);
  stream.synchronize();
  std::vector<std::vector<double>> draw_phases(draw_times.needed - 1),
      update_phases(update_times.needed - 1);
  EXPECT_EQ(test::phase_clock::add_phase_durations(draw_times.check("draw"), draw_phases), "");
  EXPECT_EQ(test::phase_clock::add_phase_durations(update_times.check("update"), update_phases),
            "");
  const kernels::ReplayCounters counters = buffer.read_counters();
  EXPECT_EQ(counters.stale, 0u) << "the entries' generations were meant to be current";
}

}  // namespace
