#include "lib/replay/cpu_replay_buffer.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "kernels/core/error.h"
#include "lib/replay/unit_uniform.h"

namespace resident {

namespace {

const ReplayConfig& validated(const ReplayConfig& config) {
  validate(config);
  return config;
}

bool is_rank(const ReplayConfig& config) { return config.mode == ReplayPriorityMode::Rank; }

[[noreturn]] void throw_invalid(const char* call, const std::string& detail, const char* file,
                                int line) {
  throw Error(call, "invalid argument", detail, file, line);
}

}  // namespace

CpuReplayBuffer::CpuReplayBuffer(const ReplayConfig& config)
    : config_(validated(config)),
      states_(config.capacity * config.state_dim),
      actions_(config.capacity),
      rewards_(config.capacity),
      next_states_(config.capacity * config.state_dim),
      dones_(config.capacity),
      generations_(config.capacity, 0),
      tree_(config.capacity),
      rank_order_(is_rank(config) ? config.capacity : 0) {
  if (is_rank(config_)) {
    rank_mass_prefix_.resize(config_.capacity + 1);
    rank_mass_prefix_[0] = 0.0;
    for (std::size_t r = 1; r <= config_.capacity; ++r)
      rank_mass_prefix_[r] =
          rank_mass_prefix_[r - 1] + std::pow(static_cast<double>(r), -config_.alpha);
  }
}

double CpuReplayBuffer::new_item_priority() const noexcept {
  const double max = tree_.max();
  return max > 0.0 ? max : 1.0;
}

void CpuReplayBuffer::write_priority(std::uint32_t slot, double priority) {
  if (is_rank(config_)) {
    if (rank_order_.contains(slot)) rank_order_.erase(slot);
    if (priority > 0.0) rank_order_.insert(slot, priority);
  }
  tree_.set(slot, priority);
}

void CpuReplayBuffer::insert_batch(const TransitionBatchView& batch) {
  const std::size_t n = batch.actions.size();
  const std::size_t dim = config_.state_dim;
  if (batch.states.size() != n * dim || batch.next_states.size() != n * dim ||
      batch.rewards.size() != n || batch.dones.size() != n) {
    throw_invalid("CpuReplayBuffer::insert_batch",
                  "span sizes disagree: actions " + std::to_string(n) + ", rewards " +
                      std::to_string(batch.rewards.size()) + ", dones " +
                      std::to_string(batch.dones.size()) + ", states " +
                      std::to_string(batch.states.size()) + " and next_states " +
                      std::to_string(batch.next_states.size()) + " (expected " +
                      std::to_string(n * dim) + " = n * state_dim " + std::to_string(dim) + ")",
                  __FILE__, __LINE__);
  }
  const double priority = new_item_priority();
  for (std::size_t row = 0; row < n; ++row) {
    const std::size_t slot = cursor_;
    std::copy_n(batch.states.begin() + static_cast<std::ptrdiff_t>(row * dim), dim,
                states_.begin() + static_cast<std::ptrdiff_t>(slot * dim));
    std::copy_n(batch.next_states.begin() + static_cast<std::ptrdiff_t>(row * dim), dim,
                next_states_.begin() + static_cast<std::ptrdiff_t>(slot * dim));
    actions_[slot] = batch.actions[row];
    rewards_[slot] = batch.rewards[row];
    dones_[slot] = batch.dones[row];
    ++generations_[slot];
    write_priority(static_cast<std::uint32_t>(slot), priority);
    cursor_ = slot + 1 == config_.capacity ? 0 : slot + 1;
    if (size_ < config_.capacity) ++size_;
  }
}

bool CpuReplayBuffer::can_sample(std::size_t batch) const {
  return batch >= 1 && batch <= size_ && tree_.total() > 0.0;
}

CpuReplayBuffer::Draw CpuReplayBuffer::draw(std::size_t k, std::size_t batch, double u) const {
  const bool stratified = config_.sampling == ReplaySampling::Stratified;
  const double position = stratified ? static_cast<double>(k) + u : u;
  const double strata = stratified ? static_cast<double>(batch) : 1.0;
  if (!is_rank(config_)) {
    const double total = tree_.total();
    const std::size_t slot = tree_.find_prefix_sum(position * total / strata);
    return {static_cast<std::uint32_t>(slot), tree_.leaf(slot) / total};
  }
  const std::size_t live_ranked = rank_order_.size();
  const double rank_total = rank_mass_prefix_[live_ranked];
  const double mass = position * rank_total / strata;
  // First r in [1, M] with prefix[r] > mass; past the end (rounding) clamps to M.
  const auto first = rank_mass_prefix_.begin() + 1;
  const auto last = first + static_cast<std::ptrdiff_t>(live_ranked);
  const std::size_t rank = std::min(
      static_cast<std::size_t>(std::upper_bound(first, last, mass) - first) + 1, live_ranked);
  return {rank_order_.slot_at_rank(rank),
          std::pow(static_cast<double>(rank), -config_.alpha) / rank_total};
}

double CpuReplayBuffer::min_live_probability() const {
  if (!is_rank(config_)) return tree_.min_positive() / tree_.total();
  const std::size_t live_ranked = rank_order_.size();
  return std::pow(static_cast<double>(live_ranked), -config_.alpha) /
         rank_mass_prefix_[live_ranked];
}

template <class NextUniform>
void CpuReplayBuffer::sample_draws(std::size_t batch, NextUniform&& next_uniform,
                                   SampledBatch& out) {
  if (!can_sample(batch)) {
    validate_batch(batch, size_);
    throw Error("CpuReplayBuffer::sample", "nothing to sample",
                "all " + std::to_string(size_) + " live items have priority 0", __FILE__, __LINE__);
  }
  const std::size_t dim = config_.state_dim;
  out.indices.resize(batch);
  out.generations.resize(batch);
  out.is_weights.resize(batch);
  out.states.resize(batch * dim);
  out.actions.resize(batch);
  out.rewards.resize(batch);
  out.next_states.resize(batch * dim);
  out.dones.resize(batch);
  out.beta = beta();

  const double min_probability = min_live_probability();
  for (std::size_t k = 0; k < batch; ++k) {
    const Draw drawn = draw(k, batch, next_uniform(k));
    const std::uint32_t slot = drawn.slot;
    out.indices[k] = slot;
    out.generations[k] = generations_[slot];
    out.is_weights[k] =
        static_cast<float>(std::pow(drawn.probability / min_probability, -out.beta));
    std::copy_n(states_.begin() + static_cast<std::ptrdiff_t>(slot * dim), dim,
                out.states.begin() + static_cast<std::ptrdiff_t>(k * dim));
    std::copy_n(next_states_.begin() + static_cast<std::ptrdiff_t>(slot * dim), dim,
                out.next_states.begin() + static_cast<std::ptrdiff_t>(k * dim));
    out.actions[k] = actions_[slot];
    out.rewards[k] = rewards_[slot];
    out.dones[k] = dones_[slot];
  }
  ++step_;
}

void CpuReplayBuffer::sample(std::size_t batch, std::mt19937_64& rng, SampledBatch& out) {
  sample_draws(
      batch, [&rng](std::size_t) { return unit_uniform(rng); }, out);
}

void CpuReplayBuffer::sample_with_uniforms(std::span<const double> uniforms, SampledBatch& out) {
  for (std::size_t k = 0; k < uniforms.size(); ++k) {
    if (!(uniforms[k] >= 0.0 && uniforms[k] < 1.0))
      throw_invalid("CpuReplayBuffer::sample_with_uniforms",
                    "uniforms[" + std::to_string(k) + "] = " + std::to_string(uniforms[k]) +
                        ", allowed [0, 1)",
                    __FILE__, __LINE__);
  }
  sample_draws(
      uniforms.size(), [uniforms](std::size_t k) { return uniforms[k]; }, out);
}

void CpuReplayBuffer::check_update_sizes(const char* call, std::size_t indices,
                                         std::size_t generations, std::size_t values) const {
  if (indices != generations || indices != values)
    throw_invalid(call,
                  "span sizes disagree: indices " + std::to_string(indices) + ", generations " +
                      std::to_string(generations) + ", values " + std::to_string(values),
                  __FILE__, __LINE__);
}

void CpuReplayBuffer::check_slot(const char* call, std::size_t slot, std::size_t limit) const {
  if (slot >= limit)
    throw_invalid(call,
                  "index " + std::to_string(slot) + ", allowed [0, " + std::to_string(limit) + ")",
                  __FILE__, __LINE__);
}

void CpuReplayBuffer::update_priorities(std::span<const std::uint32_t> indices,
                                        std::span<const std::uint32_t> generations,
                                        std::span<const float> td_errors) {
  constexpr const char* kCall = "CpuReplayBuffer::update_priorities";
  check_update_sizes(kCall, indices.size(), generations.size(), td_errors.size());
  for (std::uint32_t slot : indices) check_slot(kCall, slot, size_);
  for (std::size_t e = 0; e < indices.size(); ++e) {
    const double priority =
        std::pow(std::fabs(static_cast<double>(td_errors[e])) + config_.epsilon, config_.alpha);
    if (!std::isfinite(priority)) {
      ++nonfinite_count_;
      continue;
    }
    if (generations[e] != generations_[indices[e]]) {
      ++stale_count_;
      continue;
    }
    write_priority(indices[e], priority);
  }
}

void CpuReplayBuffer::assign_priorities(std::span<const std::uint32_t> indices,
                                        std::span<const std::uint32_t> generations,
                                        std::span<const double> priorities) {
  constexpr const char* kCall = "CpuReplayBuffer::assign_priorities";
  check_update_sizes(kCall, indices.size(), generations.size(), priorities.size());
  for (std::size_t e = 0; e < indices.size(); ++e) {
    check_slot(kCall, indices[e], size_);
    if (!(std::isfinite(priorities[e]) && priorities[e] >= 0.0))
      throw_invalid(kCall,
                    "priorities[" + std::to_string(e) + "] = " + std::to_string(priorities[e]) +
                        ", allowed [0, inf), finite",
                    __FILE__, __LINE__);
  }
  for (std::size_t e = 0; e < indices.size(); ++e) {
    if (generations[e] != generations_[indices[e]]) {
      ++stale_count_;
      continue;
    }
    write_priority(indices[e], priorities[e]);
  }
}

std::uint64_t CpuReplayBuffer::take_nonfinite_count() noexcept {
  return std::exchange(nonfinite_count_, 0);
}

std::uint64_t CpuReplayBuffer::take_stale_count() noexcept {
  return std::exchange(stale_count_, 0);
}

double CpuReplayBuffer::probability(std::size_t slot) const {
  check_slot("CpuReplayBuffer::probability", slot, config_.capacity);
  const double priority = tree_.leaf(slot);
  if (priority <= 0.0) return 0.0;
  if (!is_rank(config_)) return priority / tree_.total();
  const std::size_t rank = rank_order_.rank_of(static_cast<std::uint32_t>(slot));
  return std::pow(static_cast<double>(rank), -config_.alpha) /
         rank_mass_prefix_[rank_order_.size()];
}

double CpuReplayBuffer::leaf_priority(std::size_t slot) const {
  check_slot("CpuReplayBuffer::leaf_priority", slot, config_.capacity);
  return tree_.leaf(slot);
}

std::uint32_t CpuReplayBuffer::generation(std::size_t slot) const {
  check_slot("CpuReplayBuffer::generation", slot, config_.capacity);
  return generations_[slot];
}

}  // namespace resident
