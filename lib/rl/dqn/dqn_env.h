// DqnEnv: the vector environment a DqnTrainer collects from (CartPole-v1 or the trading env on
// a synthetic market), behind the few calls the trainer needs. Setup in the constructor
// (uploads the market once, resets every env); step() only enqueues kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kernels/rl/dqn/transition_assembly.h"
#include "lib/env/cartpole_env.h"
#include "lib/env/market_series.h"
#include "lib/env/trading_env.h"
#include "lib/rl/dqn/dqn_config.h"

namespace resident::rl {

class DqnEnv {
 public:
  DqnEnv(const DqnConfig& config, cudaStream_t stream);

  std::size_t env_count() const noexcept { return env_count_; }
  std::size_t observation_size() const noexcept { return observation_size_; }
  std::size_t action_count() const noexcept { return action_count_; }

  // Hot path: one step of every env with actions [N] (device).
  void step(const std::int32_t* actions, cudaStream_t stream);

  // Device views of the last step (valid for the env's lifetime).
  const float* observations() const noexcept;  // [N, D] what the policy sees now
  const float* rewards() const noexcept;       // [N]
  const std::uint8_t* terminated() const noexcept;  // [N] or null (never terminal)
  const std::uint8_t* truncated() const noexcept;   // [N]
  kernels::dqn::TransitionSources sources() const noexcept;

  // The synthetic market of a trading env (null for CartPole): for oracles in tests.
  const SyntheticMarket* market() const noexcept { return market_ ? &*market_ : nullptr; }
  // Checkpoint phase: the env's whole device state as bytes, and its restore (throws
  // resident::Error on a mismatch, changing nothing).
  std::vector<std::uint8_t> save_state() const {
    return cartpole_ ? cartpole_->save_state() : trading_->save_state();
  }
  DeviceStateReader stage_state(std::span<const std::uint8_t> bytes) {
    return cartpole_ ? cartpole_->stage_state(bytes) : trading_->stage_state(bytes);
  }

 private:
  std::size_t env_count_ = 0;
  std::size_t observation_size_ = 0;
  std::size_t action_count_ = 0;
  std::unique_ptr<env::CartPoleEnv> cartpole_;
  std::optional<SyntheticMarket> market_;
  std::unique_ptr<TradingEnv> trading_;
};

}  // namespace resident::rl
