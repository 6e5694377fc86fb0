// TradingEnv: N trading environments on the GPU over one device-resident market
// series. Semantics, starts and float order are tests/reference/trading_reference.h's; the
// start of episode e of env n comes from Philox keyed by (mix_seed(seed, stream_id), n, e) with
// e a device-resident per-env episode counter (kernels/env/trading_step.h), so a CUDA-graph
// replay of step() draws the same starts an eager run would.
//
// Setup (construction): validates, uploads the normalized features [T, F] and next returns [T]
// once (blocking H2D copies: call it in the audit's "setup" phase), allocates all state and
// outputs, and resets every environment on `stream`.
// Hot path: step() and reset() launch one kernel each; no allocation, no copy, no sync; both
// are capturable into a CUDA graph. The views stay valid for the env's lifetime and are
// overwritten by every step.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/env/trading_step.h"
#include "lib/core/device_buffer.h"
#include "lib/core/device_state_bytes.h"
#include "lib/env/market_series.h"

namespace resident {

struct TradingEnvConfig {
  std::size_t env_count = 1;       // N >= 1
  std::size_t window = 1;          // W >= 1
  std::size_t episode_length = 1;  // L >= 1; the series needs T >= W + L
  float cost_per_unit = 0.0f;      // finite, >= 0
  std::uint64_t seed = 0;
  std::uint64_t stream_id = 0;     // Philox stream of the start draws
};

// Device views of the per-env state, [N] each (tests and checkpoints read them).
struct TradingEnvStateView {
  const std::int32_t* start = nullptr;
  const std::int32_t* step_in_episode = nullptr;
  const std::int32_t* position = nullptr;
  const float* episode_return = nullptr;
  const std::uint32_t* episode = nullptr;               // the episode counter of each env
  const float* completed_return_sum = nullptr;          // ended episodes' returns, in order
  const std::uint32_t* completed_episodes = nullptr;
};

class TradingEnv {
 public:
  // `normalized_features` is [T, F] for series.steps and series.feature_count (e.g.
  // normalize_features(series, options)); next returns are series.next_returns. Throws
  // resident::Error("TradingEnv", "invalid config", ...) naming the first bad value.
  TradingEnv(const MarketSeries& series, std::span<const float> normalized_features,
             const TradingEnvConfig& config, cudaStream_t stream);

  const TradingEnvConfig& config() const noexcept { return config_; }
  std::size_t env_count() const noexcept { return config_.env_count; }
  std::size_t observation_size() const noexcept { return observation_size_; }  // W * F + 1
  std::size_t steps() const noexcept { return steps_; }                          // T
  std::size_t feature_count() const noexcept { return feature_count_; }          // F
  std::uint64_t philox_seed() const noexcept { return params_.seed; }  // mix_seed(seed, id)

  // Every env back to its episode-0 start, flat, counters and sums zeroed; observations().
  void reset(cudaStream_t stream);
  // One step with actions [N] (device, int32 in {0, 1, 2}; others count as invalid, act flat).
  void step(const std::int32_t* actions, cudaStream_t stream);

  // [N, D]: what the policy acts on (after auto-reset).
  const float* observations() const noexcept { return observations_.data(); }
  // [N, D]: s' of the last step's transitions (the final observation where done).
  const float* next_observations() const noexcept { return next_observations_.data(); }
  const float* rewards() const noexcept { return rewards_.data(); }            // [N]
  const std::uint8_t* dones() const noexcept { return dones_.data(); }         // [N] truncated
  const float* episode_returns() const noexcept { return episode_returns_.data(); }  // [N], NaN
  const std::uint32_t* invalid_actions() const noexcept { return invalid_actions_.data(); }  // [1]
  TradingEnvStateView state() const noexcept;

  // Checkpoint phase (copies and synchronizes): the per-env state, counters and sums and the last
  // step's outputs as bytes (lib/core/device_state_bytes.h; the market series is not included:
  // it comes from the config). load_state() restores them into an env of the same shape, or
  // throws resident::Error naming the mismatch and changes nothing.
  std::vector<std::uint8_t> save_state() const;
  void load_state(std::span<const std::uint8_t> bytes) { stage_state(bytes).commit(); }
  // load_state in two steps: every check now, nothing applied until the reader's commit() (bytes
  // must outlive it).
  DeviceStateReader stage_state(std::span<const std::uint8_t> bytes);

 private:
  kernels::TradingStateView mutable_state() noexcept;

  TradingEnvConfig config_;
  std::size_t steps_ = 0;
  std::size_t feature_count_ = 0;
  std::size_t observation_size_ = 0;
  kernels::TradingParams params_;
  DeviceBuffer<float> features_;
  DeviceBuffer<float> next_returns_;
  DeviceBuffer<std::int32_t> start_, step_in_episode_, position_;
  DeviceBuffer<float> episode_return_;
  DeviceBuffer<std::uint32_t> episode_;
  DeviceBuffer<float> completed_return_sum_;
  DeviceBuffer<std::uint32_t> completed_episodes_;
  DeviceBuffer<float> observations_, next_observations_, rewards_, episode_returns_;
  DeviceBuffer<std::uint8_t> dones_;
  DeviceBuffer<std::uint32_t> invalid_actions_;
};

}  // namespace resident
