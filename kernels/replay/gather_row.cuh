// One sampled row copied by one warp: storage row `slot` -> row k of `rows` (states and
// next_states [state_dim] coalesced across the lanes, every load before any store:
// kernels/core/copy_row_pair.cuh; action, reward, done by lane 0, loaded before and stored
// after). `between()` runs once, by every lane, after the first loads are issued and before any
// store: the caller's arithmetic overlaps the loads. Overwrites. Shared by the fused
// proportional draw and the standalone gather.
#pragma once

#include <cstdint>

#include "kernels/core/copy_row_pair.cuh"
#include "kernels/replay/replay_state.h"

namespace resident::kernels {

template <typename Between>
__device__ inline void copy_row_by_warp(const SampledRowsView& rows,
                                        const ReplayStorageView& storage, std::uint32_t k,
                                        std::uint32_t slot, int lane, Between&& between) {
  const std::uint64_t dim = storage.state_dim;
  const std::uint64_t from = std::uint64_t{slot} * dim;
  const std::uint64_t to = std::uint64_t{k} * dim;
  std::int32_t action = 0;
  float reward = 0.0f;
  std::uint8_t done = 0;
  if (lane == 0) {
    action = storage.actions[slot];
    reward = storage.rewards[slot];
    done = storage.dones[slot];
  }
  copy_row_pair(storage.states + from, storage.next_states + from, rows.states + to,
                rows.next_states + to, dim, static_cast<std::uint32_t>(lane), 32u, between);
  if (lane == 0) {
    rows.actions[k] = action;
    rows.rewards[k] = reward;
    rows.dones[k] = done;
  }
}

__device__ inline void copy_row_by_warp(const SampledRowsView& rows,
                                        const ReplayStorageView& storage, std::uint32_t k,
                                        std::uint32_t slot, int lane) {
  copy_row_by_warp(rows, storage, k, slot, lane, [] {});
}

}  // namespace resident::kernels
