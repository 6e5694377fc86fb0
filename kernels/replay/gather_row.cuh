// One sampled row copied by one warp: storage row `slot` -> row k of `rows` (states and
// next_states [state_dim] coalesced across the lanes; action, reward, done by lane 0).
// Overwrites. Shared by the fused proportional draw and the standalone gather.
#pragma once

#include <cstdint>

#include "kernels/replay/replay_state.h"

namespace resident::kernels {

__device__ inline void copy_row_by_warp(const SampledRowsView& rows, const ReplayStorageView& storage,
                                        std::uint32_t k, std::uint32_t slot, int lane) {
  const std::uint64_t dim = storage.state_dim;
  const std::uint64_t from = std::uint64_t{slot} * dim;
  const std::uint64_t to = std::uint64_t{k} * dim;
  for (std::uint64_t c = static_cast<std::uint64_t>(lane); c < dim; c += 32) {
    rows.states[to + c] = storage.states[from + c];
    rows.next_states[to + c] = storage.next_states[from + c];
  }
  if (lane == 0) {
    rows.actions[k] = storage.actions[slot];
    rows.rewards[k] = storage.rewards[slot];
    rows.dones[k] = storage.dones[slot];
  }
}

}  // namespace resident::kernels
