// GpuReplayBuffer: prioritized experience replay held entirely on the GPU (DESIGN.md,
// "Prioritized replay: exact semantics"; CpuReplayBuffer is its oracle and documents every
// rule this buffer follows too). Storage, the fp64 sum/min/max trees, sampling, IS weights
// and priority updates run on the device, all on one stream (an update, and the tree part of a
// split insert, may be given another, which its caller orders with events); the cursor, size, step and the
// non-finite/stale counters live in device memory, so insert -> sample -> update is
// capturable in a CUDA graph and replays correctly. Nothing is allocated after construction.
//
// Differences from CpuReplayBuffer, all forced by having no host involvement:
// - Uniforms come from Philox keyed by (seed, device step), draw k = subsequence k.
// - Bad update entries cannot throw: indices >= size are dropped and counted (bad_index),
//   like non-finite TD errors (nonfinite) and stale generations (stale). Read the counters
//   with a ScalarReadback at the epoch's sanctioned readback (device_counters()) and call
//   throw_if_nonfinite.
// - size() on the host is a shadow of the device size, exact because inserts have host-known n;
//   it counts host calls, so after CUDA-graph replays of insert_batch it is stale (the device
//   size, in read_counters() or device_counters(), is the truth).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/replay/replay_state.h"
#include "lib/core/checkpoint_file.h"
#include "lib/core/device_buffer.h"
#include "lib/core/device_state_bytes.h"
#include "lib/replay/replay_config.h"

namespace resident {

// n transitions on the device, row-major (states and next_states [n, state_dim]).
struct DeviceTransitions {
  const float* states = nullptr;
  const std::int32_t* actions = nullptr;
  const float* rewards = nullptr;
  const float* next_states = nullptr;
  const std::uint8_t* dones = nullptr;
};

// Device views of the last sample; valid until the next sample call.
struct DeviceSampledBatch {
  std::size_t batch = 0;
  const std::uint32_t* indices = nullptr;      // [batch]
  const std::uint32_t* generations = nullptr;  // [batch], pass back to update_priorities
  const float* is_weights = nullptr;           // [batch]
  const float* states = nullptr;               // [batch, state_dim]
  const std::int32_t* actions = nullptr;       // [batch]
  const float* rewards = nullptr;              // [batch]
  const float* next_states = nullptr;          // [batch, state_dim]
  const std::uint8_t* dones = nullptr;         // [batch]
  // GpuReplayBuffer's batches keep next_states == states + batch * state_dim: one
  // [2 batch, state_dim] block, so a network can evaluate both in one forward.
};

// Largest capacity the device tree supports (2P nodes indexed with 32 bits).
inline constexpr std::size_t kMaxGpuReplayCapacity = std::size_t{1} << 30;

// The replay's section name in a trainer's checkpoint file.
inline constexpr const char* kReplaySection = "replay";

class GpuReplayBuffer {
 public:
  // Validates `config` (and capacity <= kMaxGpuReplayCapacity, 1 <= max_batch) and allocates
  // everything. Throws resident::Error naming the bytes when an allocation fails.
  GpuReplayBuffer(const ReplayConfig& config, std::size_t max_batch, std::uint64_t seed,
                  cudaStream_t stream);

  // Device bytes a buffer of this configuration allocates.
  static std::size_t device_bytes(const ReplayConfig& config, std::size_t max_batch);

  const ReplayConfig& config() const noexcept { return config_; }
  std::size_t capacity() const noexcept { return config_.capacity; }
  std::size_t size() const noexcept { return size_; }
  std::size_t max_batch() const noexcept { return max_batch_; }
  bool can_sample(std::size_t batch) const noexcept {
    return batch >= 1 && batch <= size_ && batch <= max_batch_;
  }

  // Appends n transitions from device memory at the cursor; when n > capacity only the last
  // `capacity` rows are kept. Enqueued on the stream; no host synchronization.
  void insert_batch(const DeviceTransitions& batch, std::size_t n);
  // Draws `batch` items (throws unless can_sample(batch)). Advances the device step.
  DeviceSampledBatch sample(std::size_t batch);

  // An insert in two parts, for a caller that runs the tree work beside other work (DqnTrainer:
  // beside its collection, on the stream of its priority update). insert_leaves(n, stream) does
  // on `stream` what insert_batch(rows, n) does to the trees, generations, cursor and size (the
  // new leaves at the live maximum priority), without the rows; the caller orders it with events
  // after the buffer's earlier work and before sample_inserting. sample_inserting(rows, n, batch)
  // then, on the buffer's stream, writes those n rows to their slots while it draws `batch`
  // items (a draw of one of those slots copies its row from `rows`). Together they equal
  // insert_batch(rows, n) followed by sample(batch), bit for bit. Proportional mode only;
  // 1 <= n <= capacity; between the two calls the buffer takes no other call (each throws
  // resident::Error naming the pending rows).
  void insert_leaves(std::size_t n, cudaStream_t stream);
  DeviceSampledBatch sample_inserting(const DeviceTransitions& rows, std::size_t n,
                                      std::size_t batch);
  // Rows of the last insert_leaves that no sample_inserting or gather_drawn has written yet
  // (0: none).
  std::size_t pending_rows() const noexcept { return pending_rows_; }

  // sample_inserting in two parts as well, for a caller that draws beside other work
  // (DqnTrainer: the draw beside its collection, right after the tree work). draw_ahead(batch,
  // stream), after insert_leaves (on the same stream, or ordered by events), draws the batch's
  // slots, generations and IS weights (they need the trees only) and advances the device step;
  // gather_drawn(rows, n) then, on the buffer's stream, which the caller orders after
  // draw_ahead, writes the n pending rows to their slots and copies the drawn rows into the
  // sample views (a drawn pending slot's row from `rows`). insert_leaves + draw_ahead +
  // gather_drawn equals insert_batch(rows, n) + sample(batch), bit for bit. Between draw_ahead
  // and gather_drawn the buffer takes no other call (each throws resident::Error naming the
  // pending rows or the batch drawn ahead).
  void draw_ahead(std::size_t batch, cudaStream_t stream);
  DeviceSampledBatch gather_drawn(const DeviceTransitions& rows, std::size_t n);
  // The batch of the last draw_ahead whose rows no gather_drawn has copied yet (0: none).
  std::size_t drawn_ahead() const noexcept { return drawn_ahead_; }

  // The host's shadow of the device state (size, pending rows, the batch drawn ahead): a caller
  // whose CUDA-graph capture of buffer calls failed (nothing of it ran) puts it back as it was.
  struct HostShadow {
    std::size_t size = 0;
    std::size_t pending_rows = 0;
    std::size_t drawn_ahead = 0;
  };
  HostShadow host_shadow() const noexcept { return {size_, pending_rows_, drawn_ahead_}; }
  void restore_host_shadow(const HostShadow& shadow) noexcept {
    size_ = shadow.size;
    pending_rows_ = shadow.pending_rows;
    drawn_ahead_ = shadow.drawn_ahead;
  }
  // The same with the uniforms given on the device ([batch], each in [0, 1)): for oracles.
  DeviceSampledBatch sample_with_uniforms(const double* device_uniforms, std::size_t batch);
  // p = (|td| + eps)^alpha for each entry, with the duplicate/stale/non-finite rules.
  void update_priorities(const std::uint32_t* indices, const std::uint32_t* generations,
                         const float* td_errors, std::size_t count);
  // The same enqueued on `stream` instead of the buffer's: the caller orders it (events) after
  // the work that wrote its inputs and before the buffer's next insert, sample or update, e.g. to
  // run it beside work that does not touch the buffer (DqnTrainer's collection).
  void update_priorities(const std::uint32_t* indices, const std::uint32_t* generations,
                         const float* td_errors, std::size_t count, cudaStream_t stream);

  // Diagnostics: the phase clocks of the proportional draw and of the priority update
  // (kernels/replay/replay_kernels.h) write their %globaltimer readings to these device arrays
  // at every later launch; an empty span turns that clock off. Each non-empty span must hold
  // exactly draw_phase_readings() / update_phase_readings() values (else resident::Error naming
  // both sizes, nothing changed). A launch captured into a graph keeps the arrays set at
  // capture: they must outlive every replay.
  std::size_t draw_phase_readings() const noexcept;
  std::size_t update_phase_readings() const noexcept;
  void record_phase_times(std::span<std::uint64_t> draw_times,
                          std::span<std::uint64_t> update_times);

  // The device counters (cursor, size, step, nonfinite, stale, bad_index).
  const kernels::ReplayCounters* device_counters() const noexcept { return counters_.data(); }
  // Throws resident::Error when a counter read back from device_counters() shows non-finite
  // TD errors or bad indices; `where` names the step or epoch for the message.
  static void throw_if_nonfinite(std::uint64_t nonfinite, std::uint64_t bad_index,
                                 const std::string& where);

  // Inspection for setup and tests: blocking copies (the audit sees them), never in a hot path.
  kernels::ReplayCounters read_counters() const;

  // Checkpoint phase (copies and synchronizes): storage, generations, the three trees and the
  // device counters as bytes (lib/core/device_state_bytes.h). load_state() restores them into a
  // buffer of the same capacity, state_dim and tree size, or throws resident::Error naming the
  // mismatch and changes nothing. (Sample outputs and rank-mode scratch are not state.)
  std::vector<std::uint8_t> save_state() const;
  void load_state(std::span<const std::uint8_t> bytes) { stage_state(bytes).commit(); }
  // load_state in two steps: every check now, nothing applied until the reader's commit() (bytes
  // must outlive it).
  DeviceStateReader stage_state(std::span<const std::uint8_t> bytes);
  // The same state as section `name` of a checkpoint container (lib/core/checkpoint_file.h),
  // which a trainer writes beside its own sections. stage_section() stages it like stage_state()
  // (`file` must outlive the commit()); a state of another shape throws resident::Error
  // "checkpoint mismatch" naming the file, the section and the mismatching record.
  void save_section(CheckpointWriter& out, std::string name = kReplaySection) const;
  DeviceStateReader stage_section(const CheckpointFile& file,
                                  std::string_view name = kReplaySection);
  std::vector<double> read_leaf_priorities() const;  // [capacity]
  // [2P], node 1 the root; only the kept heights (0, 5, 10, ..., the root) are maintained
  // (kernels/replay/replay_tree.cuh).
  std::vector<double> read_tree_sums() const;
  struct TreeExtremes {
    std::vector<double> min_positive, max;  // [2P] each, node 1 the root (+inf: no positive leaf)
  };
  TreeExtremes read_tree_extremes() const;  // the min and max trees (tests; synchronizes)
  std::uint64_t rank_sort_temp_bytes() const noexcept { return sort_temp_.bytes(); }

 private:
  DeviceSampledBatch draw(const double* device_uniforms, std::size_t batch,
                          const DeviceTransitions& pending_rows, std::size_t pending_count);
  void check_batch(const char* call, std::size_t batch) const;
  void check_rows(const char* call, const DeviceTransitions& rows, std::size_t n) const;
  kernels::SampledRowsView sampled_rows_view(std::size_t batch) noexcept;
  DeviceSampledBatch sampled_batch(std::size_t batch) noexcept;
  void require_no_pending_rows(const char* call) const;
  kernels::ReplayTreeView tree_view() noexcept;
  kernels::ReplayStorageView storage_view() noexcept;

  ReplayConfig config_;
  std::size_t max_batch_;
  std::uint64_t seed_;
  cudaStream_t stream_;
  std::size_t leaves_;
  std::size_t size_ = 0;
  std::size_t pending_rows_ = 0;
  std::size_t drawn_ahead_ = 0;
  std::uint64_t* draw_phase_times_ = nullptr;
  std::uint64_t* update_phase_times_ = nullptr;
  kernels::ReplayParams params_{};

  DeviceBuffer<double> sum_, min_positive_, max_;  // [2P] each
  DeviceBuffer<float> states_, next_states_;       // [capacity, state_dim]
  DeviceBuffer<std::int32_t> actions_;
  DeviceBuffer<float> rewards_;
  DeviceBuffer<std::uint8_t> dones_;
  DeviceBuffer<std::uint32_t> generations_;
  DeviceBuffer<kernels::ReplayCounters> counters_;

  // Sample outputs [max_batch].
  DeviceBuffer<std::uint32_t> out_indices_, out_generations_;
  DeviceBuffer<float> out_weights_, out_state_pairs_, out_rewards_;  // pairs [2 max_batch, dim]
  DeviceBuffer<std::int32_t> out_actions_;
  DeviceBuffer<std::uint8_t> out_dones_;

  // Rank mode only: slot iota, sorted keys/slots, rank mass prefix, CUB temp storage.
  DeviceBuffer<std::uint32_t> slot_iota_, sorted_slots_;
  DeviceBuffer<double> sorted_priorities_, rank_prefix_;
  DeviceBuffer<std::byte> sort_temp_;
};

}  // namespace resident
