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
#include <string>
#include <vector>

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

ReplayConfig config() {
  ReplayConfig c;
  c.capacity = kCapacity;
  c.state_dim = kDim;
  return c;
}

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
                "end (step advance)"});
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
  DeviceBuffer<std::uint64_t> draw_times(kDrawReadings), update_times(kUpdateReadings);
  std::vector<std::vector<double>> draw_phases(kDrawReadings - 1),
      update_phases(kUpdateReadings - 1);
  constexpr int kWarmUp = 10, kSteps = 60;
  std::vector<std::uint32_t> clocked_last, plain_last;
  for (int s = 0; s < kSteps; ++s) {
    const bool timed = s >= kWarmUp;
    if (timed) {  // zeroed: %globaltimer never reads 0
      draw_times.upload(std::vector<std::uint64_t>(kDrawReadings, 0));
      update_times.upload(std::vector<std::uint64_t>(kUpdateReadings, 0));
    }
    clocked.record_phase_times(timed ? draw_times.data() : nullptr,
                               timed ? update_times.data() : nullptr);
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
    const std::vector<std::uint64_t> draw = draw_times.download(), update = update_times.download();
    for (std::size_t i = 0; i < draw.size(); ++i) ASSERT_NE(draw[i], 0u) << "draw reading " << i;
    for (std::size_t i = 0; i < update.size(); ++i)
      ASSERT_NE(update[i], 0u) << "update reading " << i;
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

}  // namespace
