// An insert's rows written to their storage slots: rows first_row, first_row + row_stride, ...
// of the n-row batch `rows` go to slots (first_slot + row) % capacity (first_slot < capacity,
// n <= capacity), one row per group of `group_size` threads: the group's lanes over the state
// elements (coalesced, every load before any store: kernels/core/copy_row_pair.cuh), its lane 0
// the row's scalars (loaded with them, stored after). Overwrites the slots' rows (not their
// generations or leaves). Shared by the insert and the draw that follows a split insert.
#pragma once

#include <cstdint>

#include "kernels/core/copy_row_pair.cuh"
#include "kernels/replay/replay_state.h"

namespace resident::kernels {

__device__ inline void write_rows_by_group(const ReplayStorageView& storage,
                                           std::uint32_t capacity, std::uint32_t first_slot,
                                           const TransitionRowsView& rows, std::uint32_t n,
                                           std::uint32_t first_row, std::uint32_t row_stride,
                                           std::uint32_t lane, std::uint32_t group_size) {
  const std::uint64_t dim = storage.state_dim;
  for (std::uint32_t row = first_row; row < n; row += row_stride) {
    const std::uint32_t wrapped = first_slot + row;  // < 2 capacity <= 2^31
    const std::uint32_t slot = wrapped >= capacity ? wrapped - capacity : wrapped;
    std::int32_t action = 0;
    float reward = 0.0f;
    std::uint8_t done = 0;
    if (lane == 0) {
      action = rows.actions[row];
      reward = rows.rewards[row];
      done = rows.dones[row];
    }
    copy_row_pair(rows.states + row * dim, rows.next_states + row * dim,
                  storage.states + slot * dim, storage.next_states + slot * dim, dim, lane,
                  group_size, [] {});
    if (lane == 0) {
      storage.actions[slot] = action;
      storage.rewards[slot] = reward;
      storage.dones[slot] = done;
    }
  }
}

}  // namespace resident::kernels
