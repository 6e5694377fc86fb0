// TradingVectorEnv: N trading environments (lib/env's TradingEnv) on a synthetic market, behind
// lib/env's VectorEnv interface (for PpoTrainer). Actions {0, 1, 2} = short/flat/long; observations
// the window of W normalized feature rows and the position (D = W * F + 1); episodes end only by
// the time limit L (truncated, never terminated: terminated is a fixed zero buffer, and the final
// observation of a transition is TradingEnv's next_observations, valid at every step).
//
// Episode statistics: TradingEnv's per-env completed sums are cumulative and stay untouched
// (they are its documented state and part of its checkpoint); collect_episode_stats() diffs them
// against a device snapshot (kernels/rl/ppo/episode_stats_delta.h), one kernel, no host sync.
//
// Setup (construction): validates the config (resident::Error naming the first bad field before
// anything touches the device), generates the market and normalizes its features on the host
// (lib/env/market_series.h, as lib/rl/dqn/dqn_env.cpp does), builds the TradingEnv (uploads the
// series once, blocking) and resets it with config.seed.
// reset(seed): with the seed the env was built with, TradingEnv::reset (addresses unchanged);
// with another seed the TradingEnv is rebuilt with that seed (setup: blocking, and the device
// addresses of observations() and step_outputs() change, so call it before anything captured
// them; PpoTrainer calls it once, in its constructor). Give config.seed the trainer's seed to
// avoid the rebuild.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "lib/core/device_buffer.h"
#include "lib/env/market_series.h"
#include "lib/env/trading_env.h"
#include "lib/env/vector_env.h"

namespace resident::ppo {

struct TradingVectorEnvConfig {
  SyntheticMarketConfig market{};             // validated by its own validate()
  FeatureNormalizationOptions normalization{};  // as normalize_features() takes them
  std::size_t env_count = 16;                 // N >= 1
  std::size_t window = 9;                     // W >= 1
  std::size_t episode_length = 100;           // L >= 1, with market.steps >= W + L
  float cost_per_unit = 0.0f;                 // finite, >= 0
  std::uint64_t seed = 1;                     // start draws (see reset())
  std::uint64_t stream_id = 0x50504f5472616465ull;  // "PPOTrade": Philox stream of the starts
};

// Throws resident::Error("TradingVectorEnvConfig", "invalid config", ...) naming the first bad
// field, its value and the allowed range (market fields via validate(SyntheticMarketConfig)).
// Host only: no CUDA call.
void validate(const TradingVectorEnvConfig& config);

class TradingVectorEnv final : public VectorEnv {
 public:
  explicit TradingVectorEnv(const TradingVectorEnvConfig& config, cudaStream_t stream = nullptr);

  std::size_t env_count() const override { return config_.env_count; }
  std::size_t observation_size() const override { return observation_size_; }
  std::size_t action_count() const override { return 3; }

  void reset(std::uint64_t seed, cudaStream_t stream) override;
  void step(const std::int32_t* actions, cudaStream_t stream) override;
  const float* observations() const override { return trading_->observations(); }
  VectorEnvStep step_outputs() const override;
  void collect_episode_stats(cudaStream_t stream) override;
  const double* episode_return_sum() const override { return return_sum_.data(); }
  const unsigned long long* episode_count() const override { return episode_count_.data(); }

  // Layout: u64 magic, env count, philox seed, series fingerprint, TradingEnv state byte count;
  // the TradingEnv state (TradingEnv::save_state); the snapshots as DeviceStateWriter records.
  std::vector<std::byte> save_state(cudaStream_t stream) const override;
  void check_state(std::span<const std::byte> state) const override;
  void load_state(std::span<const std::byte> state, cudaStream_t stream) override;

  const TradingVectorEnvConfig& config() const noexcept { return config_; }
  const SyntheticMarket& market() const noexcept { return market_; }
  const TradingEnv& trading() const noexcept { return *trading_; }

 private:
  void build(std::uint64_t seed, cudaStream_t stream);
  void clear_statistics(cudaStream_t stream);

  TradingVectorEnvConfig config_;
  SyntheticMarket market_;
  std::vector<float> normalized_;  // [T, F], kept for a rebuild with another seed
  std::size_t observation_size_ = 0;
  std::uint64_t fingerprint_ = 0;  // FNV-1a of the series, W, L and the cost
  std::unique_ptr<TradingEnv> trading_;
  DeviceBuffer<std::uint8_t> terminated_;     // [N], always 0
  DeviceBuffer<float> snapshot_return_;       // [N]
  DeviceBuffer<std::uint32_t> snapshot_count_;  // [N]
  DeviceBuffer<double> return_sum_;
  DeviceBuffer<unsigned long long> episode_count_;
};

}  // namespace resident::ppo
