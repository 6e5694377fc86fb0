#include "lib/replay/gpu_replay_buffer.h"

#include <cmath>
#include <string>

#include "kernels/replay/replay_kernels.h"
#include "kernels/core/error.h"
#include "lib/replay/tree_layout.h"

namespace resident {

namespace {

bool is_rank(const ReplayConfig& config) { return config.mode == ReplayPriorityMode::Rank; }

// ceil(log2(leaves) / 5): the five-level groups of the draw's descent and the update's kept
// levels (kernels/replay/replay_tree.cuh).
std::size_t kept_groups(std::size_t leaves) {
  std::size_t depth = 0;
  while ((std::size_t{1} << depth) < leaves) ++depth;
  return (depth + 4) / 5;
}

[[noreturn]] void throw_invalid(const char* call, const std::string& what, const char* file,
                                int line) {
  throw Error(call, "invalid argument", what, file, line);
}

void check_gpu_config(const ReplayConfig& config, std::size_t max_batch) {
  validate(config);
  if (config.capacity > kMaxGpuReplayCapacity)
    throw_invalid("GpuReplayBuffer", "capacity = " + std::to_string(config.capacity) +
                                         ", allowed [1, " + std::to_string(kMaxGpuReplayCapacity) + "]",
                  __FILE__, __LINE__);
  if (max_batch == 0 || max_batch > config.capacity)
    throw_invalid("GpuReplayBuffer", "max_batch = " + std::to_string(max_batch) + ", allowed [1, " +
                                         std::to_string(config.capacity) + "] (the capacity)",
                  __FILE__, __LINE__);
}

}  // namespace

std::size_t GpuReplayBuffer::device_bytes(const ReplayConfig& config, std::size_t max_batch) {
  const std::size_t cap = config.capacity;
  const std::size_t dim = config.state_dim;
  const std::size_t nodes = 2 * tree_leaf_count(cap);
  std::size_t bytes = 3 * nodes * sizeof(double);                        // trees
  bytes += cap * (2 * dim * sizeof(float) + sizeof(std::int32_t) + sizeof(float) +
                  sizeof(std::uint8_t) + sizeof(std::uint32_t));  // storage + generations
  bytes += max_batch * (2 * sizeof(std::uint32_t) + 2 * sizeof(float) + sizeof(std::int32_t) +
                        sizeof(std::uint8_t) + 2 * dim * sizeof(float));
  if (is_rank(config))
    bytes += cap * (2 * sizeof(std::uint32_t) + sizeof(double)) + (cap + 1) * sizeof(double) +
             kernels::sort_priorities_temp_bytes(static_cast<std::uint32_t>(cap));
  return bytes;
}

GpuReplayBuffer::GpuReplayBuffer(const ReplayConfig& config, std::size_t max_batch,
                                 std::uint64_t seed, cudaStream_t stream)
    : config_((check_gpu_config(config, max_batch), config)),
      max_batch_(max_batch),
      seed_(seed),
      stream_(stream),
      leaves_(tree_leaf_count(config.capacity)),
      sum_(2 * leaves_),
      min_positive_(2 * leaves_),
      max_(2 * leaves_),
      states_(config.capacity * config.state_dim),
      next_states_(config.capacity * config.state_dim),
      actions_(config.capacity),
      rewards_(config.capacity),
      dones_(config.capacity),
      generations_(config.capacity),
      counters_(1),
      out_indices_(max_batch),
      out_generations_(max_batch),
      out_weights_(max_batch),
      out_state_pairs_(2 * max_batch * config.state_dim),
      out_rewards_(max_batch),
      out_actions_(max_batch),
      out_dones_(max_batch) {
  params_.alpha = config.alpha;
  params_.epsilon = config.epsilon;
  params_.beta_start = config.beta_start;
  params_.beta_max = config.beta_max;
  params_.beta_annealing_steps = config.beta_annealing_steps;
  params_.stratified = config.sampling == ReplaySampling::Stratified;
  const auto capacity = static_cast<std::uint32_t>(config.capacity);

  // Setup (may upload): empty trees, zero generations and counters, scratch.
  kernels::launch_init_replay_tree(tree_view(), stream_);
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(generations_.data(), 0, generations_.bytes(), stream_));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(counters_.data(), 0, counters_.bytes(), stream_));
  if (is_rank(config)) {
    slot_iota_ = DeviceBuffer<std::uint32_t>(config.capacity);
    sorted_slots_ = DeviceBuffer<std::uint32_t>(config.capacity);
    sorted_priorities_ = DeviceBuffer<double>(config.capacity);
    rank_prefix_ = DeviceBuffer<double>(config.capacity + 1);
    sort_temp_ = DeviceBuffer<std::byte>(kernels::sort_priorities_temp_bytes(capacity));
    // The rank masses summed on the host in rank order, exactly as CpuReplayBuffer does.
    std::vector<double> prefix(config.capacity + 1, 0.0);
    for (std::size_t r = 1; r <= config.capacity; ++r)
      prefix[r] = prefix[r - 1] + std::pow(static_cast<double>(r), -config.alpha);
    RESIDENT_CUDA_CHECK(cudaMemcpyAsync(rank_prefix_.data(), prefix.data(), rank_prefix_.bytes(),
                                        cudaMemcpyHostToDevice, stream_));
  }
  if (is_rank(config)) kernels::launch_init_slot_iota(slot_iota_.data(), capacity, stream_);
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `prefix` must outlive its copy
}

kernels::ReplayTreeView GpuReplayBuffer::tree_view() noexcept {
  return {sum_.data(), min_positive_.data(), max_.data(), static_cast<std::uint32_t>(leaves_),
          static_cast<std::uint32_t>(config_.capacity)};
}

kernels::ReplayStorageView GpuReplayBuffer::storage_view() noexcept {
  return {states_.data(),  actions_.data(),     rewards_.data(),
          next_states_.data(), dones_.data(), generations_.data(),
          static_cast<std::uint32_t>(config_.state_dim)};
}

void GpuReplayBuffer::require_no_pending_rows(const char* call) const {
  if (drawn_ahead_ != 0)
    throw Error(call, "call out of order",
                std::to_string(pending_rows_) + " rows of insert_leaves are pending and a batch of " +
                    std::to_string(drawn_ahead_) +
                    " was drawn ahead: gather_drawn must write and copy them first",
                __FILE__, __LINE__);
  if (pending_rows_ != 0)
    throw Error(call, "call out of order",
                std::to_string(pending_rows_) +
                    " rows of insert_leaves are pending: sample_inserting (or draw_ahead and "
                    "gather_drawn) must write them first",
                __FILE__, __LINE__);
}

void GpuReplayBuffer::insert_batch(const DeviceTransitions& batch, std::size_t n) {
  require_no_pending_rows("GpuReplayBuffer::insert_batch");
  if (n == 0) return;
  if (batch.states == nullptr || batch.actions == nullptr || batch.rewards == nullptr ||
      batch.next_states == nullptr || batch.dones == nullptr)
    throw_invalid("GpuReplayBuffer::insert_batch", "a transition array is null", __FILE__, __LINE__);
  if (n > std::size_t{UINT32_MAX})
    throw_invalid("GpuReplayBuffer::insert_batch",
                  "n = " + std::to_string(n) + ", allowed [0, 4294967295]", __FILE__, __LINE__);
  // Only the last `capacity` rows of an oversized batch survive: skip the others up front.
  const std::size_t skip = n > config_.capacity ? n - config_.capacity : 0;
  const std::size_t dim = config_.state_dim;
  const kernels::TransitionRowsView kept{batch.states + skip * dim, batch.actions + skip,
                                         batch.rewards + skip, batch.next_states + skip * dim,
                                         batch.dones + skip};
  kernels::launch_insert_transitions(storage_view(), tree_view(), counters_.data(), kept,
                                     static_cast<std::uint32_t>(n - skip),
                                     static_cast<std::uint32_t>(skip), stream_);
  size_ = std::min(size_ + (n - skip), config_.capacity);
}

DeviceSampledBatch GpuReplayBuffer::sample(std::size_t batch) {
  require_no_pending_rows("GpuReplayBuffer::sample");
  return draw(nullptr, batch, {}, 0);
}

void GpuReplayBuffer::insert_leaves(std::size_t n, cudaStream_t stream) {
  require_no_pending_rows("GpuReplayBuffer::insert_leaves");
  if (is_rank(config_))
    throw_invalid("GpuReplayBuffer::insert_leaves",
                  "mode = rank: the split insert draws proportionally (use insert_batch)",
                  __FILE__, __LINE__);
  if (n == 0 || n > config_.capacity)
    throw_invalid("GpuReplayBuffer::insert_leaves",
                  "n = " + std::to_string(n) + ", allowed [1, " +
                      std::to_string(config_.capacity) + "] (the capacity)",
                  __FILE__, __LINE__);
  kernels::launch_insert_leaves(storage_view(), tree_view(), counters_.data(),
                                static_cast<std::uint32_t>(n), stream);
  size_ = std::min(size_ + n, config_.capacity);
  pending_rows_ = n;
}

void GpuReplayBuffer::check_rows(const char* call, const DeviceTransitions& rows,
                                 std::size_t n) const {
  if (n != pending_rows_)
    throw_invalid(call,
                  "n = " + std::to_string(n) + ", but insert_leaves left " +
                      std::to_string(pending_rows_) + " rows pending",
                  __FILE__, __LINE__);
  if (n != 0 && (rows.states == nullptr || rows.actions == nullptr || rows.rewards == nullptr ||
                 rows.next_states == nullptr || rows.dones == nullptr))
    throw_invalid(call, "a transition array is null", __FILE__, __LINE__);
}

DeviceSampledBatch GpuReplayBuffer::sample_inserting(const DeviceTransitions& rows,
                                                     std::size_t n, std::size_t batch) {
  const char* call = "GpuReplayBuffer::sample_inserting";
  if (drawn_ahead_ != 0) require_no_pending_rows(call);
  check_rows(call, rows, n);
  if (n == 0) return sample(batch);
  const DeviceSampledBatch drawn = draw(nullptr, batch, rows, n);
  pending_rows_ = 0;
  return drawn;
}

void GpuReplayBuffer::draw_ahead(std::size_t batch, cudaStream_t stream) {
  const char* call = "GpuReplayBuffer::draw_ahead";
  if (drawn_ahead_ != 0) require_no_pending_rows(call);
  if (pending_rows_ == 0)
    throw Error(call, "call out of order",
                "no rows of insert_leaves are pending: draw_ahead follows insert_leaves", __FILE__,
                __LINE__);
  check_batch(call, batch);
  // No rows: the draw writes the slots, generations and weights; gather_drawn the rows.
  kernels::launch_sample_proportional(out_indices_.data(), out_generations_.data(),
                                      out_weights_.data(), {}, storage_view(), tree_view(),
                                      generations_.data(), counters_.data(), nullptr, seed_,
                                      static_cast<std::uint32_t>(batch), params_, {}, 0, stream,
                                      draw_phase_times_);
  drawn_ahead_ = batch;
}

DeviceSampledBatch GpuReplayBuffer::gather_drawn(const DeviceTransitions& rows, std::size_t n) {
  const char* call = "GpuReplayBuffer::gather_drawn";
  if (drawn_ahead_ == 0)
    throw Error(call, "call out of order", "nothing was drawn ahead: draw_ahead comes first",
                __FILE__, __LINE__);
  check_rows(call, rows, n);
  const std::size_t batch = drawn_ahead_;
  kernels::launch_gather_rows(sampled_rows_view(batch), storage_view(), out_indices_.data(),
                              static_cast<std::uint32_t>(batch), counters_.data(),
                              static_cast<std::uint32_t>(config_.capacity),
                              {rows.states, rows.actions, rows.rewards, rows.next_states,
                               rows.dones},
                              static_cast<std::uint32_t>(n), stream_);
  pending_rows_ = 0;
  drawn_ahead_ = 0;
  return sampled_batch(batch);
}

DeviceSampledBatch GpuReplayBuffer::sample_with_uniforms(const double* device_uniforms,
                                                         std::size_t batch) {
  require_no_pending_rows("GpuReplayBuffer::sample_with_uniforms");
  if (device_uniforms == nullptr)
    throw_invalid("GpuReplayBuffer::sample_with_uniforms", "device_uniforms is null", __FILE__,
                  __LINE__);
  return draw(device_uniforms, batch, {}, 0);
}

void GpuReplayBuffer::check_batch(const char* call, std::size_t batch) const {
  if (batch > max_batch_)
    throw_invalid(call, "batch = " + std::to_string(batch) + ", allowed [1, " +
                            std::to_string(max_batch_) + "] (max_batch)",
                  __FILE__, __LINE__);
  validate_batch(batch, size_);
}

kernels::SampledRowsView GpuReplayBuffer::sampled_rows_view(std::size_t batch) noexcept {
  // states then next_states, one [2 batch, state_dim] block (DeviceSampledBatch's promise).
  float* const states = out_state_pairs_.data();
  return {states, out_actions_.data(), out_rewards_.data(), states + batch * config_.state_dim,
          out_dones_.data()};
}

DeviceSampledBatch GpuReplayBuffer::sampled_batch(std::size_t batch) noexcept {
  const kernels::SampledRowsView rows = sampled_rows_view(batch);
  return {batch,      out_indices_.data(), out_generations_.data(), out_weights_.data(),
          rows.states, rows.actions,       rows.rewards,            rows.next_states,
          rows.dones};
}

DeviceSampledBatch GpuReplayBuffer::draw(const double* device_uniforms, std::size_t batch,
                                         const DeviceTransitions& pending_rows,
                                         std::size_t pending_count) {
  check_batch("GpuReplayBuffer::sample", batch);
  const auto b = static_cast<std::uint32_t>(batch);
  const kernels::SampledRowsView rows = sampled_rows_view(batch);
  if (is_rank(config_)) {
    const auto capacity = static_cast<std::uint32_t>(config_.capacity);
    kernels::launch_sort_priorities(sorted_priorities_.data(), sorted_slots_.data(),
                                    sum_.data() + leaves_, slot_iota_.data(), capacity,
                                    sort_temp_.data(), sort_temp_.bytes(), stream_);
    kernels::launch_sample_rank(out_indices_.data(), out_generations_.data(), out_weights_.data(),
                                sorted_slots_.data(), sorted_priorities_.data(),
                                rank_prefix_.data(), capacity, generations_.data(),
                                counters_.data(), device_uniforms, seed_, b, params_, stream_);
    kernels::launch_gather_rows(rows, storage_view(), out_indices_.data(), b, counters_.data(),
                                static_cast<std::uint32_t>(config_.capacity), {}, 0, stream_);
  } else {
    kernels::launch_sample_proportional(out_indices_.data(), out_generations_.data(),
                                        out_weights_.data(), rows, storage_view(), tree_view(),
                                        generations_.data(), counters_.data(), device_uniforms,
                                        seed_, b, params_,
                                        {pending_rows.states, pending_rows.actions,
                                         pending_rows.rewards, pending_rows.next_states,
                                         pending_rows.dones},
                                        static_cast<std::uint32_t>(pending_count), stream_,
                                        draw_phase_times_);
  }
  return sampled_batch(batch);
}

std::size_t GpuReplayBuffer::draw_phase_readings() const noexcept {
  return 6 + kept_groups(leaves_);
}

std::size_t GpuReplayBuffer::update_phase_readings() const noexcept {
  return 6 + 2 * kept_groups(leaves_);
}

void GpuReplayBuffer::record_phase_times(std::span<std::uint64_t> draw_times,
                                         std::span<std::uint64_t> update_times) {
  const auto check = [](const char* which, std::span<std::uint64_t> times, std::size_t needed) {
    if (!times.empty() && times.size() != needed)
      throw_invalid("GpuReplayBuffer::record_phase_times",
                    std::string(which) + " readings: " + std::to_string(times.size()) +
                        " values given, this tree's launch writes " + std::to_string(needed),
                    __FILE__, __LINE__);
  };
  check("draw", draw_times, draw_phase_readings());
  check("update", update_times, update_phase_readings());
  draw_phase_times_ = draw_times.empty() ? nullptr : draw_times.data();
  update_phase_times_ = update_times.empty() ? nullptr : update_times.data();
}

void GpuReplayBuffer::update_priorities(const std::uint32_t* indices,
                                        const std::uint32_t* generations, const float* td_errors,
                                        std::size_t count) {
  update_priorities(indices, generations, td_errors, count, stream_);
}

void GpuReplayBuffer::update_priorities(const std::uint32_t* indices,
                                        const std::uint32_t* generations, const float* td_errors,
                                        std::size_t count, cudaStream_t stream) {
  require_no_pending_rows("GpuReplayBuffer::update_priorities");
  if (count == 0) return;
  if (indices == nullptr || generations == nullptr || td_errors == nullptr)
    throw_invalid("GpuReplayBuffer::update_priorities", "an input array is null", __FILE__,
                  __LINE__);
  if (count > std::size_t{INT32_MAX})
    throw_invalid("GpuReplayBuffer::update_priorities",
                  "count = " + std::to_string(count) + ", allowed [0, 2147483647]", __FILE__,
                  __LINE__);
  kernels::launch_update_priorities(tree_view(), counters_.data(), generations_.data(), indices, generations, td_errors,
                                    static_cast<std::uint32_t>(count), params_, stream,
                                    update_phase_times_);
}

void GpuReplayBuffer::throw_if_nonfinite(std::uint64_t nonfinite, std::uint64_t bad_index,
                                         const std::string& where) {
  if (nonfinite == 0 && bad_index == 0) return;
  throw Error("GpuReplayBuffer::update_priorities", "non-finite or invalid update",
              where + ": " + std::to_string(nonfinite) + " non-finite TD errors and " +
                  std::to_string(bad_index) +
                  " indices past the live size were dropped (the tree is intact)",
              __FILE__, __LINE__);
}

kernels::ReplayCounters GpuReplayBuffer::read_counters() const {
  kernels::ReplayCounters host{};
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  RESIDENT_CUDA_CHECK(cudaMemcpy(&host, counters_.data(), sizeof host, cudaMemcpyDeviceToHost));
  return host;
}

std::vector<double> GpuReplayBuffer::read_leaf_priorities() const {
  std::vector<double> leaves(config_.capacity);
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  RESIDENT_CUDA_CHECK(cudaMemcpy(leaves.data(), sum_.data() + leaves_,
                                 leaves.size() * sizeof(double), cudaMemcpyDeviceToHost));
  return leaves;
}

std::vector<double> GpuReplayBuffer::read_tree_sums() const {
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return sum_.download();
}

GpuReplayBuffer::TreeExtremes GpuReplayBuffer::read_tree_extremes() const {
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return {min_positive_.download(), max_.download()};
}

std::vector<std::uint8_t> GpuReplayBuffer::save_state() const {
  require_no_pending_rows("GpuReplayBuffer::save_state");
  // The device's size, not the host's shadow (stale after CUDA-graph replays of inserts): equal
  // device states save to equal bytes however their inserts were launched.
  const std::uint64_t size[1] = {read_counters().size};  // synchronizes the stream
  DeviceStateWriter w;
  w.add_host(std::span<const std::uint64_t>(size))
      .add(sum_)
      .add(min_positive_)
      .add(max_)
      .add(states_)
      .add(next_states_)
      .add(actions_)
      .add(rewards_)
      .add(dones_)
      .add(generations_)
      .add(counters_);
  return w.take();
}

DeviceStateReader GpuReplayBuffer::stage_state(std::span<const std::uint8_t> bytes) {
  require_no_pending_rows("GpuReplayBuffer::load_state");
  DeviceStateReader r(bytes, "GpuReplayBuffer::load_state");
  const std::uint64_t size = r.next<std::uint64_t>(1, "size")[0];
  if (size > config_.capacity)
    throw Error("GpuReplayBuffer::load_state", "state mismatch",
                "size = " + std::to_string(size) + ", allowed [0, " +
                    std::to_string(config_.capacity) + "] (the capacity)",
                __FILE__, __LINE__);
  r.into(sum_, "sum tree")
      .into(min_positive_, "min tree")
      .into(max_, "max tree")
      .into(states_, "states")
      .into(next_states_, "next states")
      .into(actions_, "actions")
      .into(rewards_, "rewards")
      .into(dones_, "dones")
      .into(generations_, "generations")
      .into(counters_, "counters")
      .then([this, size] { size_ = static_cast<std::size_t>(size); });
  r.check_consumed();
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream_));  // no work of the buffer is in flight
  return r;
}

void GpuReplayBuffer::save_section(CheckpointWriter& out, std::string name) const {
  const std::vector<std::uint8_t> state = save_state();
  const auto* first = reinterpret_cast<const std::byte*>(state.data());
  out.add(std::move(name), std::vector<std::byte>(first, first + state.size()));
}

DeviceStateReader GpuReplayBuffer::stage_section(const CheckpointFile& file,
                                                 std::string_view name) {
  const std::span<const std::byte> bytes = file.section(name);
  try {
    return stage_state({reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()});
  } catch (const Error& e) {
    if (e.error_name() != "state mismatch") throw;
    throw Error("GpuReplayBuffer::stage_section(\"" + file.path().string() + "\" section \"" +
                    std::string(name) + "\")",
                "checkpoint mismatch", e.what(), __FILE__, __LINE__);
  }
}

}  // namespace resident
