// The slots of a split insert whose rows are still pending (launch_insert_leaves advanced the
// cursor past them; the draw or the gather that follows writes them): count slots from `first`,
// wrapping at `capacity`. Shared by the proportional draw and the gather after a draw ahead.
#pragma once

#include <cstdint>

namespace resident::kernels {

struct PendingSlots {
  std::uint32_t first = 0;
  std::uint32_t count = 0;
  std::uint32_t capacity = 1;

  // From the cursor after the insert (count <= capacity <= 2^30).
  __device__ static PendingSlots after_insert(std::uint32_t cursor, std::uint32_t count,
                                              std::uint32_t capacity) {
    const std::uint32_t shifted = cursor + (capacity - count);  // < 2 capacity <= 2^31
    return {shifted >= capacity ? shifted - capacity : shifted, count, capacity};
  }

  // Whether `slot` is pending; if so, `row` is its row of the pending rows.
  __device__ bool holds(std::uint32_t slot, std::uint32_t& row) const {
    row = slot >= first ? slot - first : slot + (capacity - first);
    return row < count;
  }
};

}  // namespace resident::kernels
