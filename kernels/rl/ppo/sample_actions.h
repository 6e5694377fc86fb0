// Action sampling from a categorical policy on the device (kernels/rl/ppo/sample_actions.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::ppo {

// Where a rollout step stores what the policy did; all null for plain sampling.
struct SampleStore {
  std::int32_t* actions = nullptr;     // [T, rows]: row (t, r) at t * rows + r
  float* log_prob = nullptr;           // [T, rows]
  std::uint64_t* step_slot = nullptr;  // [1]: receives *counter (read by the store of this step)
  std::size_t steps = 1;               // T >= 1; t = *counter % T
};

// One action per row of logits [rows, cols] (row-major), drawn from softmax(logits_r) by the
// inverse CDF: u = (d >> 8) * 2^-24 in [0, 1) from the 32-bit draw d of cuRAND Philox
// (seed = philox_seed, subsequence = r, offset = 4 * *counter); the action is the first c with
// u * S < sum_{c' <= c} e^(x_c' - max), S the full sum (the last column of nonzero mass when
// rounding leaves none). log_prob = (x_a - max) - log S.
// Overwrites actions [rows]; with `store`, also the row t = *counter % T of its arrays and
// *store.step_slot = *counter. The counter is only read (the step's store kernel advances it),
// so a replayed graph draws fresh values. One thread per row; deterministic; no atomics, no
// allocation, no host synchronization. cols >= 1.
void launch_sample_actions(std::int32_t* actions, SampleStore store, const float* logits,
                           std::size_t rows, std::size_t cols, std::uint64_t philox_seed,
                           const std::uint64_t* counter, cudaStream_t stream);

// Softmax probabilities [rows, cols] (overwritten) of logits [rows, cols]: the host-staged
// pipeline downloads them and samples on the CPU. Same max-subtracted sum as the sampler.
void launch_policy_probabilities(float* probabilities, const float* logits, std::size_t rows,
                                 std::size_t cols, cudaStream_t stream);

}  // namespace resident::kernels::ppo
