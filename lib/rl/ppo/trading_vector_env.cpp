#include "lib/rl/ppo/trading_vector_env.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/rl/ppo/episode_stats_delta.h"
#include "lib/core/device_state_bytes.h"
#include "kernels/core/error.h"

namespace resident::ppo {

namespace {

constexpr std::uint64_t kStateMagic = 0x31765f7664615254ull;  // "TRadv_v1"
constexpr std::size_t kHeaderWords = 5;  // magic, env count, philox seed, fingerprint, bytes

[[noreturn]] void invalid(const std::string& what, const char* file, int line) {
  throw Error("TradingVectorEnvConfig", "invalid config", what, file, line);
}

// FNV-1a over raw bytes, continuing from `hash`.
std::uint64_t fnv1a(std::uint64_t hash, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

const TradingVectorEnvConfig& validated(const TradingVectorEnvConfig& config) {
  validate(config);
  return config;
}

}  // namespace

void validate(const TradingVectorEnvConfig& c) {
  if (c.env_count == 0) invalid("env_count = 0, allowed >= 1", __FILE__, __LINE__);
  if (c.env_count > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    invalid("env_count = " + std::to_string(c.env_count) + ", allowed <= 2^31 - 1", __FILE__,
            __LINE__);
  if (c.window == 0) invalid("window = 0, allowed >= 1", __FILE__, __LINE__);
  if (c.episode_length == 0) invalid("episode_length = 0, allowed >= 1", __FILE__, __LINE__);
  if (c.market.steps < c.window + c.episode_length)
    invalid("market.steps = " + std::to_string(c.market.steps) +
                ", allowed >= window + episode_length = " +
                std::to_string(c.window + c.episode_length),
            __FILE__, __LINE__);
  if (!std::isfinite(c.cost_per_unit) || c.cost_per_unit < 0.0f)
    invalid("cost_per_unit = " + std::to_string(c.cost_per_unit) + ", allowed finite and >= 0",
            __FILE__, __LINE__);
  if (c.normalization.kind == FeatureNormalization::Rolling && c.normalization.rolling_window == 0)
    invalid("normalization.rolling_window = 0, allowed >= 1", __FILE__, __LINE__);
  if (!std::isfinite(c.normalization.epsilon) || !(c.normalization.epsilon > 0.0))
    invalid("normalization.epsilon = " + std::to_string(c.normalization.epsilon) +
                ", allowed finite and > 0",
            __FILE__, __LINE__);
  validate(c.market);  // resident::Error listing every bad market field
}

TradingVectorEnv::TradingVectorEnv(const TradingVectorEnvConfig& config, cudaStream_t stream)
    : config_(validated(config)),
      market_(make_synthetic_market(config.market)),
      normalized_(normalize_features(market_.series, config.normalization)),
      observation_size_(config.window * market_.series.feature_count + 1) {
  const MarketSeries& s = market_.series;
  std::uint64_t h = 0xcbf29ce484222325ull;
  h = fnv1a(h, normalized_.data(), normalized_.size() * sizeof(float));
  h = fnv1a(h, s.next_returns.data(), s.next_returns.size() * sizeof(float));
  const std::uint64_t shape[3] = {config_.window, config_.episode_length, s.feature_count};
  h = fnv1a(h, shape, sizeof shape);
  h = fnv1a(h, &config_.cost_per_unit, sizeof config_.cost_per_unit);
  fingerprint_ = h;

  const std::size_t n = config_.env_count;
  terminated_ = DeviceBuffer<std::uint8_t>(n);
  snapshot_return_ = DeviceBuffer<float>(n);
  snapshot_count_ = DeviceBuffer<std::uint32_t>(n);
  return_sum_ = DeviceBuffer<double>(1);
  episode_count_ = DeviceBuffer<unsigned long long>(1);
  build(config_.seed, stream);
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(terminated_.data(), 0, terminated_.bytes(), stream));
  clear_statistics(stream);
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream));  // setup phase
}

void TradingVectorEnv::build(std::uint64_t seed, cudaStream_t stream) {
  TradingEnvConfig t;
  t.env_count = config_.env_count;
  t.window = config_.window;
  t.episode_length = config_.episode_length;
  t.cost_per_unit = config_.cost_per_unit;
  t.seed = seed;
  t.stream_id = config_.stream_id;
  trading_.reset();  // free the old env's buffers before allocating the new one's
  trading_ = std::make_unique<TradingEnv>(market_.series, normalized_, t, stream);
}

void TradingVectorEnv::clear_statistics(cudaStream_t stream) {
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(snapshot_return_.data(), 0, snapshot_return_.bytes(), stream));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(snapshot_count_.data(), 0, snapshot_count_.bytes(), stream));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(return_sum_.data(), 0, return_sum_.bytes(), stream));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(episode_count_.data(), 0, episode_count_.bytes(), stream));
}

void TradingVectorEnv::reset(std::uint64_t seed, cudaStream_t stream) {
  if (seed != trading_->config().seed) {
    // TradingEnv's construction synchronizes the device, so it is ordered after `stream`.
    build(seed, stream);
  } else {
    trading_->reset(stream);
  }
  clear_statistics(stream);
}

void TradingVectorEnv::step(const std::int32_t* actions, cudaStream_t stream) {
  trading_->step(actions, stream);
}

VectorEnvStep TradingVectorEnv::step_outputs() const {
  return {trading_->rewards(), terminated_.data(), trading_->dones(),
          trading_->next_observations(), trading_->observations()};
}

void TradingVectorEnv::collect_episode_stats(cudaStream_t stream) {
  const TradingEnvStateView s = trading_->state();
  kernels::ppo::launch_episode_stats_delta(return_sum_.data(), episode_count_.data(),
                                           snapshot_return_.data(), snapshot_count_.data(),
                                           s.completed_return_sum, s.completed_episodes,
                                           config_.env_count, stream);
}

std::vector<std::byte> TradingVectorEnv::save_state(cudaStream_t stream) const {
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream));  // the state after the work on `stream`
  const std::vector<std::uint8_t> trading = trading_->save_state();
  DeviceStateWriter w;
  w.add(snapshot_return_).add(snapshot_count_);
  const std::vector<std::uint8_t> snapshots = w.take();
  const std::uint64_t header[kHeaderWords] = {kStateMagic, config_.env_count,
                                              trading_->philox_seed(), fingerprint_,
                                              trading.size()};
  std::vector<std::byte> out(sizeof header + trading.size() + snapshots.size());
  std::memcpy(out.data(), header, sizeof header);
  std::memcpy(out.data() + sizeof header, trading.data(), trading.size());
  std::memcpy(out.data() + sizeof header + trading.size(), snapshots.data(), snapshots.size());
  return out;
}

void TradingVectorEnv::check_state(std::span<const std::byte> state) const {
  std::uint64_t header[kHeaderWords] = {};
  if (state.size() >= sizeof header) std::memcpy(header, state.data(), sizeof header);
  const auto mismatch = [](const std::string& what, const char* file, int line) {
    throw Error("TradingVectorEnv::load_state", "checkpoint mismatch", what, file, line);
  };
  if (state.size() < sizeof header || header[0] != kStateMagic)
    mismatch("env state of " + std::to_string(state.size()) +
                 " bytes is not a TradingVectorEnv state (bad size or magic)",
             __FILE__, __LINE__);
  if (header[1] != config_.env_count)
    mismatch("state of " + std::to_string(header[1]) + " envs; this env has " +
                 std::to_string(config_.env_count),
             __FILE__, __LINE__);
  if (header[2] != trading_->philox_seed())
    mismatch("state of philox seed " + std::to_string(header[2]) + "; this env has " +
                 std::to_string(trading_->philox_seed()) + " (another seed or stream id)",
             __FILE__, __LINE__);
  if (header[3] != fingerprint_)
    mismatch("state of another market series, window, episode length or cost (fingerprint " +
                 std::to_string(header[3]) + ", this env " + std::to_string(fingerprint_) + ")",
             __FILE__, __LINE__);
  if (header[4] > state.size() - sizeof header)
    mismatch("TradingEnv state of " + std::to_string(header[4]) + " bytes, only " +
                 std::to_string(state.size() - sizeof header) + " left",
             __FILE__, __LINE__);
  // The records themselves: staged (checked) and dropped, nothing applied.
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(state.data());
  const std::size_t trading_bytes = static_cast<std::size_t>(header[4]);
  (void)const_cast<TradingEnv&>(*trading_).stage_state({bytes + sizeof header, trading_bytes});
  DeviceStateReader r({bytes + sizeof header + trading_bytes,
                       state.size() - sizeof header - trading_bytes},
                      "TradingVectorEnv::load_state");
  (void)r.next<float>(snapshot_return_.size(), "episode return snapshots");
  (void)r.next<std::uint32_t>(snapshot_count_.size(), "episode count snapshots");
  r.check_consumed();
}

void TradingVectorEnv::load_state(std::span<const std::byte> state, cudaStream_t stream) {
  check_state(state);
  std::uint64_t header[kHeaderWords];
  std::memcpy(header, state.data(), sizeof header);
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(state.data());
  const std::size_t trading_bytes = static_cast<std::size_t>(header[4]);
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream));  // nothing queued may see half a state
  DeviceStateReader trading = trading_->stage_state({bytes + sizeof header, trading_bytes});
  DeviceStateReader r({bytes + sizeof header + trading_bytes,
                       state.size() - sizeof header - trading_bytes},
                      "TradingVectorEnv::load_state");
  r.into(snapshot_return_, "episode return snapshots")
      .into(snapshot_count_, "episode count snapshots");
  r.check_consumed();
  trading.commit();
  r.commit();
}

}  // namespace resident::ppo
