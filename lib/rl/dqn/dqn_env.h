// DqnEnv: the vector environment a DqnTrainer collects from (CartPole-v1 or the trading env on
// a synthetic market), built from a DqnConfig, behind lib/env's VectorEnv interface. Setup in the
// constructor (uploads the market once, resets every env); step() only enqueues kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "lib/core/device_state_bytes.h"
#include "lib/env/cartpole_env.h"
#include "lib/env/market_series.h"
#include "lib/env/trading_env.h"
#include "lib/env/vector_env.h"
#include "lib/rl/dqn/dqn_config.h"

namespace resident::dqn {

class DqnEnv final : public VectorEnv {
 public:
  DqnEnv(const DqnConfig& config, cudaStream_t stream);

  std::size_t env_count() const noexcept override { return env_count_; }
  std::size_t observation_size() const noexcept override { return observation_size_; }
  std::size_t action_count() const noexcept override { return action_count_; }

  // Setup. The trading env rebuilds itself (new device addresses) for a seed other than its own.
  void reset(std::uint64_t seed, cudaStream_t stream) override;
  // Hot path: one step of every env with actions [N] (device).
  void step(const std::int32_t* actions, cudaStream_t stream) override;
  const float* observations() const noexcept override;  // [N, D] what the policy sees now
  // The last step's outputs: the trading env never terminates (terminated null) and gives s' of
  // every env as final_observations.
  VectorEnvStep step_outputs() const noexcept override;
  // CartPole's episode statistics; the trading env keeps none here and throws resident::Error
  // (episode_return_sum() and episode_count() null): DqnTrainer tracks episodes itself.
  void collect_episode_stats(cudaStream_t stream) override;
  const double* episode_return_sum() const noexcept override;
  const unsigned long long* episode_count() const noexcept override;

  // Checkpoint phase: the env's whole device state as bytes (the CartPole or trading env's own
  // records), and its restore in two steps (stage_state checks everything and throws
  // resident::Error on a mismatch, changing nothing; the reader's commit() applies it).
  std::vector<std::uint8_t> save_state() const {
    return cartpole_ ? cartpole_->save_state() : trading_->save_state();
  }
  DeviceStateReader stage_state(std::span<const std::uint8_t> bytes) {
    return cartpole_ ? cartpole_->stage_state(bytes) : trading_->stage_state(bytes);
  }
  // The same bytes through VectorEnv's calls.
  std::vector<std::byte> save_state(cudaStream_t stream) const override;
  void check_state(std::span<const std::byte> state) const override;
  void load_state(std::span<const std::byte> state, cudaStream_t stream) override;

  // The synthetic market of a trading env (null for CartPole): for oracles in tests.
  const SyntheticMarket* market() const noexcept { return market_ ? &*market_ : nullptr; }

 private:
  std::size_t env_count_ = 0;
  std::size_t observation_size_ = 0;
  std::size_t action_count_ = 0;
  std::unique_ptr<env::CartPoleEnv> cartpole_;
  std::optional<SyntheticMarket> market_;
  std::vector<float> normalized_;  // [T, F] of the trading env, kept for a rebuild
  TradingEnvConfig trading_config_;
  std::unique_ptr<TradingEnv> trading_;
};

}  // namespace resident::dqn
