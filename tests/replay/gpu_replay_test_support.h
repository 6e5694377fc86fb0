// Shared by the GPU replay tests: random transitions inserted identically into a GPU buffer
// and its CPU oracle (device copies of host vectors: tests/support/device_vectors.h).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "lib/core/device_buffer.h"
#include "lib/replay/cpu_replay_buffer.h"
#include "lib/replay/gpu_replay_buffer.h"
#include "tests/replay/replay_test_config.h"
#include "tests/support/device_vectors.h"

namespace resident::test {

// n random transitions on the host; states are fresh random values, never zeros.
struct HostTransitions {
  std::vector<float> states, rewards, next_states;
  std::vector<std::int32_t> actions;
  std::vector<std::uint8_t> dones;

  HostTransitions(std::size_t n, std::size_t dim, std::mt19937_64& rng) {
    std::uniform_real_distribution<float> value(-10.0f, 10.0f);
    states.resize(n * dim);
    next_states.resize(n * dim);
    for (float& x : states) x = value(rng);
    for (float& x : next_states) x = value(rng);
    for (std::size_t i = 0; i < n; ++i) {
      actions.push_back(static_cast<std::int32_t>(rng() % 7));
      rewards.push_back(value(rng));
      dones.push_back(static_cast<std::uint8_t>(rng() % 2));
    }
  }
  TransitionBatchView view() const { return {states, actions, rewards, next_states, dones}; }
};

// Inserts the same transitions into both buffers.
struct TwinInsert {
  DeviceBuffer<float> states, rewards, next_states;
  DeviceBuffer<std::int32_t> actions;
  DeviceBuffer<std::uint8_t> dones;

  TwinInsert(const HostTransitions& h, GpuReplayBuffer& gpu, CpuReplayBuffer& cpu)
      : states(to_device(h.states)),
        rewards(to_device(h.rewards)),
        next_states(to_device(h.next_states)),
        actions(to_device(h.actions)),
        dones(to_device(h.dones)) {
    gpu.insert_batch({states.data(), actions.data(), rewards.data(), next_states.data(), dones.data()},
                     h.actions.size());
    cpu.insert_batch(h.view());
  }
};

// The device batch copied to the host.
struct HostSample {
  std::vector<std::uint32_t> indices, generations;
  std::vector<float> weights, states, rewards, next_states;
  std::vector<std::int32_t> actions;
  std::vector<std::uint8_t> dones;
};

HostSample download(const DeviceSampledBatch& b, std::size_t dim);

// The kept levels of the GPU trees (kernels/replay/replay_tree.cuh: heights 5, 10, ..., and the
// root) against their definition, computed here from the stored nodes one binary level at a
// time: every kept node of the sum, min and max trees [2P] must equal the pairwise combination
// (left + right, fmin, fmax) of its descendants at the kept height below, bit for bit. Returns
// "" when all do, else the first node that does not (its index, height and the two values).
std::string kept_levels_mismatch(const std::vector<double>& sum,
                                 const std::vector<double>& min_positive,
                                 const std::vector<double>& max);

}  // namespace resident::test
