#include "lib/env/trading_env.h"

#include <cmath>
#include <limits>
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/philox.h"

namespace resident {

namespace {

void require(bool condition, const std::string& what) {
  if (!condition) throw Error("TradingEnv", "invalid config", what, __FILE__, __LINE__);
}

constexpr auto kInt32Max = static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max());

}  // namespace

TradingEnv::TradingEnv(const MarketSeries& series, std::span<const float> normalized_features,
                       const TradingEnvConfig& config, cudaStream_t stream)
    : config_(config), steps_(series.steps), feature_count_(series.feature_count) {
  require(config.env_count >= 1, "env_count = 0, need >= 1");
  require(feature_count_ >= 1, "feature_count = 0, need >= 1");
  require(series.next_returns.size() == steps_,
          std::to_string(series.next_returns.size()) + " next returns, need T = " +
              std::to_string(steps_));
  require(normalized_features.size() == steps_ * feature_count_,
          std::to_string(normalized_features.size()) + " normalized feature values, need T * F = " +
              std::to_string(steps_) + " * " + std::to_string(feature_count_));
  require(config.window >= 1, "window = 0, need >= 1");
  require(config.episode_length >= 1, "episode_length = 0, need >= 1");
  require(steps_ <= kInt32Max, "T = " + std::to_string(steps_) + " does not fit in int32");
  require(steps_ >= config.window + config.episode_length,
          "T = " + std::to_string(steps_) + " steps, need >= window + episode_length = " +
              std::to_string(config.window + config.episode_length));
  require(std::isfinite(config.cost_per_unit) && config.cost_per_unit >= 0.0f,
          "cost_per_unit = " + std::to_string(config.cost_per_unit) + ", need finite and >= 0");
  for (const float r : series.next_returns)
    require(std::isfinite(r), "a next return is not finite");
  for (const float x : normalized_features)
    require(std::isfinite(x), "a normalized feature value is not finite");

  observation_size_ = config.window * feature_count_ + 1;
  params_.window = static_cast<std::int32_t>(config.window);
  params_.episode_length = static_cast<std::int32_t>(config.episode_length);
  params_.cost_per_unit = config.cost_per_unit;
  params_.seed = mix_seed(config.seed, config.stream_id);

  const std::size_t n = config.env_count;
  features_ = DeviceBuffer<float>(normalized_features.size());
  next_returns_ = DeviceBuffer<float>(steps_);
  features_.upload(normalized_features);
  next_returns_.upload(series.next_returns);
  // A pageable cudaMemcpy may return before its DMA lands and is not ordered with a
  // non-blocking `stream`: finish the uploads before the reset reads them (setup phase).
  RESIDENT_CUDA_CHECK(cudaDeviceSynchronize());
  start_ = DeviceBuffer<std::int32_t>(n);
  step_in_episode_ = DeviceBuffer<std::int32_t>(n);
  position_ = DeviceBuffer<std::int32_t>(n);
  episode_return_ = DeviceBuffer<float>(n);
  episode_ = DeviceBuffer<std::uint32_t>(n);
  completed_return_sum_ = DeviceBuffer<float>(n);
  completed_episodes_ = DeviceBuffer<std::uint32_t>(n);
  observations_ = DeviceBuffer<float>(n * observation_size_);
  next_observations_ = DeviceBuffer<float>(n * observation_size_);
  rewards_ = DeviceBuffer<float>(n);
  episode_returns_ = DeviceBuffer<float>(n);
  dones_ = DeviceBuffer<std::uint8_t>(n);
  invalid_actions_ = DeviceBuffer<std::uint32_t>(1);
  reset(stream);
}

kernels::TradingStateView TradingEnv::mutable_state() noexcept {
  return {start_.data(),   step_in_episode_.data(),      position_.data(),
          episode_return_.data(), episode_.data(), completed_return_sum_.data(),
          completed_episodes_.data()};
}

TradingEnvStateView TradingEnv::state() const noexcept {
  return {start_.data(),   step_in_episode_.data(),      position_.data(),
          episode_return_.data(), episode_.data(), completed_return_sum_.data(),
          completed_episodes_.data()};
}

void TradingEnv::reset(cudaStream_t stream) {
  RESIDENT_CUDA_CHECK(
      cudaMemsetAsync(invalid_actions_.data(), 0, invalid_actions_.bytes(), stream));
  const kernels::TradingSeriesDeviceView series{features_.data(), next_returns_.data(),
                                                static_cast<std::int32_t>(steps_),
                                                static_cast<std::int32_t>(feature_count_)};
  kernels::launch_trading_reset(mutable_state(), observations_.data(), series, params_,
                                config_.env_count, stream);
}

void TradingEnv::step(const std::int32_t* actions, cudaStream_t stream) {
  const kernels::TradingSeriesDeviceView series{features_.data(), next_returns_.data(),
                                                static_cast<std::int32_t>(steps_),
                                                static_cast<std::int32_t>(feature_count_)};
  const kernels::TradingStepOutputs outputs{rewards_.data(),           dones_.data(),
                                            next_observations_.data(), observations_.data(),
                                            episode_returns_.data(),   invalid_actions_.data()};
  kernels::launch_trading_step(outputs, mutable_state(), actions, series, params_,
                               config_.env_count, stream);
}

std::vector<std::uint8_t> TradingEnv::save_state() const {
  DeviceStateWriter w;
  w.add(start_)
      .add(step_in_episode_)
      .add(position_)
      .add(episode_return_)
      .add(episode_)
      .add(completed_return_sum_)
      .add(completed_episodes_)
      .add(observations_)
      .add(next_observations_)
      .add(rewards_)
      .add(episode_returns_)
      .add(dones_)
      .add(invalid_actions_);
  return w.take();
}

DeviceStateReader TradingEnv::stage_state(std::span<const std::uint8_t> bytes) {
  DeviceStateReader r(bytes, "TradingEnv::load_state");
  r.into(start_, "episode starts")
      .into(step_in_episode_, "steps in episode")
      .into(position_, "positions")
      .into(episode_return_, "episode returns")
      .into(episode_, "episode counters")
      .into(completed_return_sum_, "completed return sums")
      .into(completed_episodes_, "completed episodes")
      .into(observations_, "observations")
      .into(next_observations_, "next observations")
      .into(rewards_, "rewards")
      .into(episode_returns_, "last episode returns")
      .into(dones_, "dones")
      .into(invalid_actions_, "invalid actions");
  r.check_consumed();
  return r;
}

}  // namespace resident
