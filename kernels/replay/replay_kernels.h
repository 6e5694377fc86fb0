// Launchers of the replay kernels (kernels/replay/*.cu). Each takes outputs, inputs, sizes and
// the stream, checks the launch and throws resident::Error on failure. None allocates.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/replay/replay_state.h"
#include "kernels/core/philox.h"

namespace resident::kernels {


// Writes n transitions (rows 0..n-1 of the inputs, n <= capacity), the last n of a batch whose
// first `skipped` rows were dropped, at the device cursor + skipped, wrapping; each gets the
// live maximum priority (1.0 when none is positive); bumps the slots' generations by the writes
// of the whole batch; advances cursor by skipped + n, and size. Overwrites rows and leaves.
void launch_insert_transitions(ReplayStorageView storage, ReplayTreeView tree,
                               ReplayCounters* counters, TransitionRowsView rows, std::uint32_t n,
                               std::uint32_t skipped, cudaStream_t stream);

// The tree part of an insert of n <= capacity rows (skipped = 0), without the rows: the leaves
// of slots cursor .. cursor + n - 1 (wrapping) get the live maximum priority, their generations
// grow by one, cursor and size advance. The rows must follow (launch_sample_proportional's
// pending rows) before anything reads those slots' rows.
void launch_insert_leaves(ReplayStorageView storage, ReplayTreeView tree, ReplayCounters* counters,
                          std::uint32_t n, cudaStream_t stream);

// launch_insert_leaves for n <= kFewLeaves (kernels/replay/insert_few_leaves.cu): the same
// writes, bit for bit, with the loads of every kept level in one wave.
inline constexpr std::uint32_t kFewLeaves = 32;
void launch_insert_few_leaves(ReplayTreeView tree, std::uint32_t* generations,
                              ReplayCounters* counters, std::uint32_t n, cudaStream_t stream);

// Sets p = (|td| + eps)^alpha for each entry, in order: the last writable entry of an index
// wins; non-finite priorities, stale generations and indices >= size are dropped and counted.
// One cluster of 8 blocks of 1024 threads, entries in chunks of 1024; no scratch outside shared
// memory. phase_times (diagnostics, null: off): 6 + 2 * ceil(log2(P) / 5) %globaltimer readings
// of block 0 (kernels/core/phase_clock.cuh): entry, after the wait for the draw, after the
// classification, after the claims, before the kept levels, per kept level after its barrier and
// after its recomputation (the first chunk only), and at the end.
void launch_update_priorities(ReplayTreeView tree, ReplayCounters* counters,
                              const std::uint32_t* generations_now,
                              const std::uint32_t* indices, const std::uint32_t* generations,
                              const float* td_errors, std::uint32_t count, ReplayParams params,
                              cudaStream_t stream, std::uint64_t* phase_times = nullptr);

// Proportional draws: out_indices/out_generations/out_weights [batch], and each draw's row
// gathered from `storage` into `rows` (fused: no separate gather launch; with rows.states null
// and no pending rows, a draw ahead: no rows, launch_gather_rows copies them later). pending_rows
// [pending_count] (0: none) are the rows of the split insert just before (launch_insert_leaves):
// the draw writes row j to slot (cursor - pending_count + j) % capacity, and a draw of one of
// those slots copies its row from pending_rows. Uniforms come from
// `uniforms` [batch] when non-null (tests), else from Philox keyed by (seed, step). Advances
// the device step by one. phase_times (diagnostics, null: off): 6 + ceil(log2(P) / 5)
// %globaltimer readings of draw 0's lane 0 (kernels/core/phase_clock.cuh): entry, after the wait
// for the prior kernel, after the mass (step, total, uniform), after each group's descent, after
// the row copy (the draw's generation and weight with it), after the draw's outputs, and at the
// end (the step's advance, by the warp counted in last: rarely block 0's).
void launch_sample_proportional(std::uint32_t* out_indices, std::uint32_t* out_generations,
                                float* out_weights, SampledRowsView rows,
                                ReplayStorageView storage, ReplayTreeView tree,
                                const std::uint32_t* generations_now, ReplayCounters* counters,
                                const double* uniforms, std::uint64_t seed, std::uint32_t batch,
                                ReplayParams params, TransitionRowsView pending_rows,
                                std::uint32_t pending_count, cudaStream_t stream,
                                std::uint64_t* phase_times = nullptr);

// Rank-based draws over priorities sorted in descending order (ties by slot ascending):
// sorted_slots [capacity], sorted_priorities [capacity], rank_prefix [capacity + 1] with
// rank_prefix[r] = sum_{q<=r} q^-alpha. Same outputs and step rule as the proportional draw.
void launch_sample_rank(std::uint32_t* out_indices, std::uint32_t* out_generations,
                        float* out_weights, const std::uint32_t* sorted_slots,
                        const double* sorted_priorities, const double* rank_prefix,
                        std::uint32_t capacity, const std::uint32_t* generations_now,
                        ReplayCounters* counters, const double* uniforms, std::uint64_t seed,
                        std::uint32_t batch, ReplayParams params, cudaStream_t stream);

// Gathers the rows of the drawn slots indices [batch] into `rows` (overwritten): the rank
// draw's gather, and the proportional draw ahead's (launch_sample_proportional without rows).
// pending_rows [pending_count] (0: none) are the rows of the split insert before that draw: the
// gather writes row j to slot (cursor - pending_count + j) % capacity (cursor read from
// `counters`), and a draw of one of those slots copies its row from pending_rows, as the fused
// draw does.
void launch_gather_rows(SampledRowsView rows, ReplayStorageView storage,
                        const std::uint32_t* indices, std::uint32_t batch,
                        const ReplayCounters* counters, std::uint32_t capacity,
                        TransitionRowsView pending_rows, std::uint32_t pending_count,
                        cudaStream_t stream);

// Temp bytes of launch_sort_priorities for `capacity` leaves (construction).
std::size_t sort_priorities_temp_bytes(std::uint32_t capacity);
// Sorts the leaf priorities [capacity] descending, ties by slot ascending, into
// sorted_priorities/sorted_slots [capacity].
void launch_sort_priorities(double* sorted_priorities, std::uint32_t* sorted_slots,
                            const double* leaf_priorities, const std::uint32_t* slot_iota,
                            std::uint32_t capacity, void* temp, std::size_t temp_bytes,
                            cudaStream_t stream);

// Fills slots[i] = i for i < capacity (construction of a rank-mode buffer).
void launch_init_slot_iota(std::uint32_t* slots, std::uint32_t capacity, cudaStream_t stream);

// Fills the trees with their empty state: sums and maxima 0, minima +inf (construction).
void launch_init_replay_tree(ReplayTreeView tree, cudaStream_t stream);

}  // namespace resident::kernels
