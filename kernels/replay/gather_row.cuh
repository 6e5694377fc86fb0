// One sampled row copied by one warp: row `from` of `source` (the storage's slots, or an insert's
// rows not yet written to them) -> row k of `rows` (states and next_states [state_dim]
// coalesced across the lanes, every load before any store: kernels/core/copy_row_pair.cuh;
// action, reward, done by lane 0, loaded before and stored after). `between()` runs once, by
// every lane, after the first loads are issued and before any store: the caller's arithmetic
// overlaps the loads. Overwrites. Shared by the fused proportional draw and the standalone
// gather.
#pragma once

#include <cstdint>

#include "kernels/core/copy_row_pair.cuh"
#include "kernels/replay/replay_state.h"

namespace resident::kernels {

// The storage's slots as a row source.
__device__ inline TransitionRowsView stored_rows(const ReplayStorageView& storage) {
  return {storage.states, storage.actions, storage.rewards, storage.next_states, storage.dones};
}

template <typename Between>
__device__ inline void copy_row_by_warp(const SampledRowsView& rows,
                                        const TransitionRowsView& source,
                                        std::uint32_t state_dim, std::uint32_t k,
                                        std::uint32_t from, int lane, Between&& between) {
  const std::uint64_t dim = state_dim;
  const std::uint64_t from_offset = std::uint64_t{from} * dim;
  const std::uint64_t to = std::uint64_t{k} * dim;
  std::int32_t action = 0;
  float reward = 0.0f;
  std::uint8_t done = 0;
  if (lane == 0) {
    action = source.actions[from];
    reward = source.rewards[from];
    done = source.dones[from];
  }
  copy_row_pair(source.states + from_offset, source.next_states + from_offset, rows.states + to,
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
  copy_row_by_warp(rows, stored_rows(storage), storage.state_dim, k, slot, lane, [] {});
}

}  // namespace resident::kernels
