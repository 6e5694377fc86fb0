// One transition copied by a group of `group_size` threads (this thread is `lane` of it): row
// `from` of `from_rows` -> row `to` of `to_rows` (a replay's storage, an insert's input, or a
// sample's outputs: any view with states, actions, rewards, next_states and dones). The states
// and next_states [dim] go coalesced over the group's lanes, every load before any store
// (kernels/core/copy_row_pair.cuh); action, reward and done by lane 0, loaded before and stored
// after. `between()` runs once, by every lane, after the first loads are issued and before any
// store. Overwrites. The one row copy of the insert, the draw and the gather (write_rows.cuh,
// gather_row.cuh).
#pragma once

#include <cstdint>

#include "kernels/core/copy_row_pair.cuh"
#include "kernels/replay/replay_state.h"

namespace resident::kernels {

template <typename Destination, typename Between>
__device__ inline void copy_transition(const TransitionRowsView& from_rows, std::uint32_t from,
                                       const Destination& to_rows, std::uint32_t to,
                                       std::uint64_t dim, std::uint32_t lane,
                                       std::uint32_t group_size, Between&& between) {
  const std::uint64_t from_offset = std::uint64_t{from} * dim, to_offset = std::uint64_t{to} * dim;
  std::int32_t action = 0;
  float reward = 0.0f;
  std::uint8_t done = 0;
  if (lane == 0) {
    action = from_rows.actions[from];
    reward = from_rows.rewards[from];
    done = from_rows.dones[from];
  }
  copy_row_pair(from_rows.states + from_offset, from_rows.next_states + from_offset,
                to_rows.states + to_offset, to_rows.next_states + to_offset, dim, lane,
                group_size, between);
  if (lane == 0) {
    to_rows.actions[to] = action;
    to_rows.rewards[to] = reward;
    to_rows.dones[to] = done;
  }
}

}  // namespace resident::kernels
