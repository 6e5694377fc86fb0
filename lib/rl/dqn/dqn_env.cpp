#include "lib/rl/dqn/dqn_env.h"

#include <vector>

#include "kernels/core/philox.h"

namespace resident::rl {

namespace {

constexpr std::uint64_t kTradingStreamId = 0x445141547261646eull;  // "DQATradn"

}  // namespace

DqnEnv::DqnEnv(const DqnConfig& config, cudaStream_t stream) : env_count_(config.env_count) {
  if (config.env == DqnEnvKind::CartPole) {
    cartpole_ = std::make_unique<env::CartPoleEnv>(env_count_);
    cartpole_->reset(config.seed, stream);
    observation_size_ = env::CartPoleEnv::kObservationSize;
    action_count_ = env::CartPoleEnv::kActionCount;
    return;
  }
  market_ = make_synthetic_market(config.trading.market);
  const std::vector<float> normalized =
      normalize_features(market_->series, config.trading.normalization);
  TradingEnvConfig trading;
  trading.env_count = env_count_;
  trading.window = config.trading.window;
  trading.episode_length = config.trading.episode_length;
  trading.cost_per_unit = config.trading.cost_per_unit;
  trading.seed = config.seed;
  trading.stream_id = kTradingStreamId;
  trading_ = std::make_unique<TradingEnv>(market_->series, normalized, trading, stream);
  observation_size_ = trading_->observation_size();
  action_count_ = 3;
}

void DqnEnv::step(const std::int32_t* actions, cudaStream_t stream) {
  if (cartpole_)
    cartpole_->step(actions, stream);
  else
    trading_->step(actions, stream);
}

const float* DqnEnv::observations() const noexcept {
  return cartpole_ ? cartpole_->observations() : trading_->observations();
}

const float* DqnEnv::rewards() const noexcept {
  return cartpole_ ? cartpole_->rewards() : trading_->rewards();
}

const std::uint8_t* DqnEnv::terminated() const noexcept {
  return cartpole_ ? cartpole_->terminated() : nullptr;
}

const std::uint8_t* DqnEnv::truncated() const noexcept {
  return cartpole_ ? cartpole_->truncated() : trading_->dones();
}

kernels::dqn::TransitionSources DqnEnv::sources() const noexcept {
  kernels::dqn::TransitionSources s;
  s.observations = observations();
  s.terminated = terminated();
  s.truncated = truncated();
  if (cartpole_) {
    s.next_observations = cartpole_->observations();
    s.final_observations = cartpole_->final_observations();
  } else {
    s.next_observations = trading_->next_observations();  // already the final one where done
  }
  return s;
}

}  // namespace resident::rl
