// An insert's rows written to their storage slots: rows first_row, first_row + row_stride, ...
// of the n-row batch `rows` go to slots (first_slot + row) % capacity (first_slot < capacity,
// n <= capacity), one row per group of `group_size` threads (copy_transition). Overwrites the
// slots' rows (not their generations or leaves). Shared by the insert, the draw that follows a
// split insert and the gather after a draw ahead.
#pragma once

#include <cstdint>

#include "kernels/replay/copy_transition.cuh"
#include "kernels/replay/replay_state.h"

namespace resident::kernels {

__device__ inline void write_rows_by_group(const ReplayStorageView& storage,
                                           std::uint32_t capacity, std::uint32_t first_slot,
                                           const TransitionRowsView& rows, std::uint32_t n,
                                           std::uint32_t first_row, std::uint32_t row_stride,
                                           std::uint32_t lane, std::uint32_t group_size) {
  for (std::uint32_t row = first_row; row < n; row += row_stride) {
    const std::uint32_t wrapped = first_slot + row;  // < 2 capacity <= 2^31
    const std::uint32_t slot = wrapped >= capacity ? wrapped - capacity : wrapped;
    copy_transition(rows, row, storage, slot, storage.state_dim, lane, group_size, [] {});
  }
}

}  // namespace resident::kernels
