#include "lib/rl/dqn/dqn_env.h"

#include <vector>

#include "kernels/core/error.h"
#include "kernels/core/philox.h"

namespace resident::dqn {

namespace {

constexpr std::uint64_t kTradingStreamId = 0x445141547261646eull;  // "DQATradn"

std::span<const std::uint8_t> as_u8(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()};
}

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
  normalized_ = normalize_features(market_->series, config.trading.normalization);
  trading_config_.env_count = env_count_;
  trading_config_.window = config.trading.window;
  trading_config_.episode_length = config.trading.episode_length;
  trading_config_.cost_per_unit = config.trading.cost_per_unit;
  trading_config_.seed = config.seed;
  trading_config_.stream_id = kTradingStreamId;
  trading_ = std::make_unique<TradingEnv>(market_->series, normalized_, trading_config_, stream);
  observation_size_ = trading_->observation_size();
  action_count_ = 3;
}

void DqnEnv::reset(std::uint64_t seed, cudaStream_t stream) {
  if (cartpole_) {
    cartpole_->reset(seed, stream);
  } else if (seed == trading_config_.seed) {
    trading_->reset(stream);
  } else {
    // TradingEnv's construction synchronizes the device, so it is ordered after `stream`.
    trading_config_.seed = seed;
    trading_.reset();  // free the old env's buffers before allocating the new one's
    trading_ = std::make_unique<TradingEnv>(market_->series, normalized_, trading_config_, stream);
  }
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

VectorEnvStep DqnEnv::step_outputs() const noexcept {
  if (cartpole_)
    return {cartpole_->rewards(), cartpole_->terminated(), cartpole_->truncated(),
            cartpole_->final_observations(), cartpole_->observations()};
  return {trading_->rewards(), nullptr, trading_->dones(), trading_->next_observations(),
          trading_->observations()};
}

void DqnEnv::collect_episode_stats(cudaStream_t stream) {
  if (!cartpole_)
    throw Error("DqnEnv::collect_episode_stats", "unsupported",
                "the trading env keeps no episode statistics here (DqnTrainer tracks episodes "
                "itself)",
                __FILE__, __LINE__);
  cartpole_->collect_episode_stats(stream, /*clear=*/true);
}

const double* DqnEnv::episode_return_sum() const noexcept {
  return cartpole_ ? cartpole_->episode_return_sum() : nullptr;
}

const unsigned long long* DqnEnv::episode_count() const noexcept {
  return cartpole_ ? cartpole_->episode_count() : nullptr;
}

std::vector<std::byte> DqnEnv::save_state(cudaStream_t stream) const {
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream));  // the state after the work on `stream`
  const std::vector<std::uint8_t> bytes = save_state();
  const auto* first = reinterpret_cast<const std::byte*>(bytes.data());
  return {first, first + bytes.size()};
}

void DqnEnv::check_state(std::span<const std::byte> state) const {
  // Staged (checked) and dropped, nothing applied.
  (void)(cartpole_ ? cartpole_->stage_state(as_u8(state)) : trading_->stage_state(as_u8(state)));
}

void DqnEnv::load_state(std::span<const std::byte> state, cudaStream_t stream) {
  DeviceStateReader staged = stage_state(as_u8(state));
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream));  // nothing queued may see half a state
  staged.commit();
}

}  // namespace resident::dqn
