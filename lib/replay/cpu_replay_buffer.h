// CpuReplayBuffer: prioritized experience replay on the host, with exactly the semantics of
// DESIGN.md ("Prioritized replay: exact semantics"). It is the oracle of the GPU replay tests
// and the replay of the host-staged pipelines. Not thread-safe.
//
// Storage: a ring buffer of `capacity` transitions (state [state_dim] float, action int32,
// reward float, next_state [state_dim] float, done uint8). Slot i holds the transition last
// written there; size() counts slots written at least once ("len"). Every write of a slot
// increments that slot's generation.
//
// Priorities (fp64): p_i = (|delta_i| + epsilon)^alpha, computed in double from the float TD
// error. A new transition gets the maximum priority of the items live when insert_batch is
// called (1.0 when the buffer is empty or no live item has a positive priority); every item of
// one batch gets that same priority. Leaves live in a CpuSumTree (sum, min, max; no drift) and,
// in rank mode, in a CpuRankOrder.
//
// Sampling a batch of B (the k-th of B draws uses one uniform u_k in [0, 1)):
//   proportional, stratified:  mass_k = (k + u_k) * total / B, slot = tree.find_prefix_sum(mass_k)
//   proportional, independent: mass_k = u_k * total
//   rank, stratified:          mass_k = (k + u_k) * H_M / B over the rank masses r^-alpha
//   rank, independent:         mass_k = u_k * H_M
// where H_M = sum_{r=1..M} r^-alpha (summed in order r = 1, 2, ...), M = live items with a
// positive priority, and the rank drawn is the first r whose cumulative mass exceeds mass_k
// (half-open intervals, as in the tree; a mass past the end picks the last interval). Each
// mass is evaluated left to right in double, ((k + u_k) * total) / B, so an oracle fed the same
// u_k reproduces the same slots exactly. An item of priority 0 is never sampled: it has an
// empty interval and no rank.
// Rank ties: equal priorities rank by slot index, the lower slot first (rank 1 = largest).
//
// IS weights: w_i = (N * P(i))^-beta / max_j w_j, N = size(), with max_j over the live items
// of positive priority (zero-priority items are never drawn), i.e. w_i = (P(i) / P_min)^-beta
// with P_min = p_min / total (proportional) or M^-alpha / H_M (rank); returned as float.
// beta = beta_at(config, step()), where step() counts sample calls; each sample call uses
// the current step and then increments it.
//
// Priority updates: entries are applied in order, so when an index appears twice the later
// entry wins. An entry whose generation differs from the slot's current generation (the slot
// was overwritten since it was sampled) is dropped and counted (take_stale_count). A
// non-finite TD error, or a priority that overflows to infinity, is never written: it is
// counted (take_nonfinite_count, whether or not the entry is also stale) and the slot keeps
// its previous priority, so an earlier finite entry for the same index stands. All indices
// are checked (< size()) before anything is written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "lib/replay/cpu_rank_order.h"
#include "lib/replay/cpu_sum_tree.h"
#include "lib/replay/replay_config.h"

namespace resident {

// n transitions on the host, row-major: n = actions.size().
struct TransitionBatchView {
  std::span<const float> states;          // [n * state_dim]
  std::span<const std::int32_t> actions;  // [n]
  std::span<const float> rewards;         // [n]
  std::span<const float> next_states;     // [n * state_dim]
  std::span<const std::uint8_t> dones;    // [n]
};

// The output of one sample call; its vectors are resized to the batch and reused across calls
// (no allocation once they have the capacity).
struct SampledBatch {
  std::vector<std::uint32_t> indices;      // [B] slots
  std::vector<std::uint32_t> generations;  // [B] slot generations at sampling time
  std::vector<float> is_weights;           // [B] in (0, 1]
  std::vector<float> states;               // [B * state_dim]
  std::vector<std::int32_t> actions;       // [B]
  std::vector<float> rewards;              // [B]
  std::vector<float> next_states;          // [B * state_dim]
  std::vector<std::uint8_t> dones;         // [B]
  double beta = 0.0;                       // the IS exponent these weights used
};

class CpuReplayBuffer {
 public:
  // Validates `config` (throws resident::Error) and allocates everything the buffer uses.
  explicit CpuReplayBuffer(const ReplayConfig& config);

  const ReplayConfig& config() const noexcept { return config_; }
  std::size_t capacity() const noexcept { return config_.capacity; }
  std::size_t size() const noexcept { return size_; }
  // The slot the next inserted transition goes to.
  std::size_t insert_position() const noexcept { return cursor_; }

  // Appends the batch at the cursor, wrapping around; when the batch is longer than the
  // capacity only its last `capacity` transitions remain. Throws on inconsistent span sizes.
  void insert_batch(const TransitionBatchView& batch);

  // True when sample(batch, ...) would succeed: 1 <= batch <= size() and some live item has a
  // positive priority.
  bool can_sample(std::size_t batch) const;

  // Draws a batch of `batch` with uniforms u_k = unit_uniform(rng), k = 0..batch-1 in order,
  // fills `out` (indices, generations, IS weights and the transitions' rows) and advances
  // step(). Throws resident::Error when !can_sample(batch).
  void sample(std::size_t batch, std::mt19937_64& rng, SampledBatch& out);
  // The same with the uniforms given (one per draw, each in [0, 1)): the batch size is
  // uniforms.size(). Lets an oracle replay the exact draws of another sampler.
  void sample_with_uniforms(std::span<const double> uniforms, SampledBatch& out);

  // Sets p_i = (|delta_i| + epsilon)^alpha for each (index, generation, td_error) entry, with
  // the duplicate, stale and non-finite rules above. Indices must be < size() (throws).
  void update_priorities(std::span<const std::uint32_t> indices,
                         std::span<const std::uint32_t> generations,
                         std::span<const float> td_errors);
  // Sets stored priorities directly (already exponentiated; finite and >= 0, else throws), with
  // the same duplicate and stale rules. For oracles that must share exact priorities, tests,
  // and restoring a checkpoint.
  void assign_priorities(std::span<const std::uint32_t> indices,
                         std::span<const std::uint32_t> generations,
                         std::span<const double> priorities);

  // Non-finite TD errors (and overflowing priorities) seen since the last call; resets to 0.
  std::uint64_t take_nonfinite_count() noexcept;
  // Stale update entries dropped since the last call; resets to 0.
  std::uint64_t take_stale_count() noexcept;

  // Exact sampling probability P(i) of slot i (< capacity; 0 for a slot never written or of
  // priority 0).
  double probability(std::size_t slot) const;
  // Sum of the stored priorities of all live items (the sum tree's root).
  double total_priority() const noexcept { return tree_.total(); }
  // Stored priority of slot i (< capacity; 0 for a slot never written).
  double leaf_priority(std::size_t slot) const;
  // The priority the next inserted transition gets.
  double new_item_priority() const noexcept;
  // Writes of slot i so far (< capacity); wraps after 2^32 writes of one slot.
  std::uint32_t generation(std::size_t slot) const;

  // Sample calls so far; beta() = beta_at(config(), step()) is what the next sample uses.
  std::uint64_t step() const noexcept { return step_; }
  void set_step(std::uint64_t step) noexcept { step_ = step; }
  double beta() const { return beta_at(config_, step_); }

 private:
  void write_priority(std::uint32_t slot, double priority);
  void check_update_sizes(const char* call, std::size_t indices, std::size_t generations,
                          std::size_t values) const;
  void check_slot(const char* call, std::size_t slot, std::size_t limit) const;
  template <class NextUniform>
  void sample_draws(std::size_t batch, NextUniform&& next_uniform, SampledBatch& out);
  struct Draw {
    std::uint32_t slot;
    double probability;  // P(slot), as probability(slot) computes it
  };
  // The k-th of `batch` draws, from its uniform u.
  Draw draw(std::size_t k, std::size_t batch, double u) const;
  double min_live_probability() const;

  ReplayConfig config_;
  std::size_t size_ = 0;
  std::size_t cursor_ = 0;
  std::uint64_t step_ = 0;
  std::uint64_t nonfinite_count_ = 0;
  std::uint64_t stale_count_ = 0;

  std::vector<float> states_;               // [capacity * state_dim]
  std::vector<std::int32_t> actions_;       // [capacity]
  std::vector<float> rewards_;              // [capacity]
  std::vector<float> next_states_;          // [capacity * state_dim]
  std::vector<std::uint8_t> dones_;         // [capacity]
  std::vector<std::uint32_t> generations_;  // [capacity]

  CpuSumTree tree_;
  // Rank mode only (empty otherwise): the order of the positive-priority live items, and
  // rank_mass_prefix_[r] = sum_{q=1..r} q^-alpha for r = 0..capacity.
  CpuRankOrder rank_order_;
  std::vector<double> rank_mass_prefix_;
};

}  // namespace resident
