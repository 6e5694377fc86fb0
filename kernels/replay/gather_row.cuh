// One sampled row copied by one warp: row `from` of `source` (the storage's slots, or an insert's
// rows not yet written to them) -> row k of `rows` (copy_transition). `between()` runs once, by
// every lane, after the first loads are issued and before any store: the caller's arithmetic
// overlaps the loads. Overwrites. Shared by the fused proportional draw and the standalone
// gather.
#pragma once

#include <cstdint>

#include "kernels/replay/copy_transition.cuh"
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
  copy_transition(source, from, rows, k, state_dim, static_cast<std::uint32_t>(lane), 32u,
                  between);
}

}  // namespace resident::kernels
