#include "tests/reference/trading_reference.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

namespace resident::reference {

namespace {

void require(bool condition, const std::string& what) {
  if (!condition) throw std::invalid_argument(what);
}

}  // namespace

TradingReference::TradingReference(TradingSeriesView series, TradingReferenceConfig config)
    : series_(series), config_(config) {
  const std::size_t steps = series.next_returns.size();
  const std::size_t features = series.feature_count;
  require(features >= 1, "TradingReference: feature_count = 0, need >= 1");
  require(series.normalized_features.size() == steps * features,
          "TradingReference: " + std::to_string(series.normalized_features.size()) +
              " feature values, need T * F = " + std::to_string(steps) + " * " +
              std::to_string(features));
  require(config.window >= 1, "TradingReference: window = 0, need >= 1");
  require(config.episode_length >= 1, "TradingReference: episode_length = 0, need >= 1");
  require(steps >= config.window + config.episode_length,
          "TradingReference: T = " + std::to_string(steps) + " steps, need >= window + " +
              "episode_length = " + std::to_string(config.window + config.episode_length));
  require(steps <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()),
          "TradingReference: T = " + std::to_string(steps) + " does not fit in int32");
  require(std::isfinite(config.cost_per_unit) && config.cost_per_unit >= 0.0f,
          "TradingReference: cost_per_unit = " + std::to_string(config.cost_per_unit) +
              ", need finite and >= 0");
}

std::size_t TradingReference::observation_size() const {
  return config_.window * series_.feature_count + 1;
}

std::size_t TradingReference::first_start() const { return config_.window - 1; }

std::size_t TradingReference::start_count() const {
  return steps() - config_.window - config_.episode_length + 1;
}

std::size_t TradingReference::start_from_draw(std::uint32_t draw) const {
  const std::uint64_t offset = (std::uint64_t{draw} * start_count()) >> 32;
  return first_start() + static_cast<std::size_t>(offset);
}

TradingBatchState TradingReference::reset(std::span<const std::uint32_t> start_draws) const {
  require(!start_draws.empty(), "TradingReference::reset: no start draws (N = 0)");
  const std::size_t env_count = start_draws.size();
  TradingBatchState state;
  state.start.resize(env_count);
  for (std::size_t n = 0; n < env_count; ++n)
    state.start[n] = static_cast<std::int32_t>(start_from_draw(start_draws[n]));
  state.step_in_episode.assign(env_count, 0);
  state.position.assign(env_count, 0);
  state.episode_return.assign(env_count, 0.0f);
  return state;
}

void TradingReference::observe_env(const TradingBatchState& state, std::size_t env,
                                   float* observation) const {
  const std::size_t features = series_.feature_count;
  const std::size_t time = static_cast<std::size_t>(state.start[env]) +
                           static_cast<std::size_t>(state.step_in_episode[env]);
  const std::size_t first_row = time + 1 - config_.window;
  for (std::size_t w = 0; w < config_.window; ++w)
    for (std::size_t f = 0; f < features; ++f)
      observation[w * features + f] = series_.normalized_features[(first_row + w) * features + f];
  observation[config_.window * features] = static_cast<float>(state.position[env]);
}

void TradingReference::observe(const TradingBatchState& state,
                               std::span<float> observations) const {
  const std::size_t size = observation_size();
  require(observations.size() == state.env_count() * size,
          "TradingReference::observe: observations hold " + std::to_string(observations.size()) +
              " floats, need N * D = " + std::to_string(state.env_count()) + " * " +
              std::to_string(size));
  for (std::size_t n = 0; n < state.env_count(); ++n)
    observe_env(state, n, &observations[n * size]);
}

TradingBatchStep TradingReference::step(TradingBatchState& state,
                                        std::span<const std::int32_t> actions,
                                        std::span<const std::uint32_t> reset_draws) const {
  const std::size_t env_count = state.env_count();
  require(actions.size() == env_count && reset_draws.size() == env_count,
          "TradingReference::step: " + std::to_string(env_count) + " envs, " +
              std::to_string(actions.size()) + " actions, " + std::to_string(reset_draws.size()) +
              " reset draws");
  for (const std::int32_t action : actions)
    require(action >= 0 && action < kTradingActionCount,
            "TradingReference::step: action " + std::to_string(action) +
                ", allowed 0 (short), 1 (flat), 2 (long)");

  const std::size_t size = observation_size();
  const auto episode_length = static_cast<std::int32_t>(config_.episode_length);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  TradingBatchStep out;
  out.rewards.resize(env_count);
  out.truncated.assign(env_count, 0);
  out.final_observations.assign(env_count * size, nan);
  out.episode_returns.assign(env_count, nan);
  for (std::size_t n = 0; n < env_count; ++n) {
    const auto time = static_cast<std::size_t>(state.start[n]) +
                      static_cast<std::size_t>(state.step_in_episode[n]);
    const std::int32_t new_position = actions[n] - 1;
    const auto position_change = static_cast<float>(std::abs(new_position - state.position[n]));
    const float reward = static_cast<float>(new_position) * series_.next_returns[time] -
                         config_.cost_per_unit * position_change;
    out.rewards[n] = reward;
    state.episode_return[n] += reward;
    state.position[n] = new_position;
    state.step_in_episode[n] += 1;
    if (state.step_in_episode[n] < episode_length) continue;

    out.truncated[n] = 1;
    observe_env(state, n, &out.final_observations[n * size]);
    out.episode_returns[n] = state.episode_return[n];
    state.start[n] = static_cast<std::int32_t>(start_from_draw(reset_draws[n]));
    state.step_in_episode[n] = 0;
    state.position[n] = 0;
    state.episode_return[n] = 0.0f;
  }
  return out;
}

PolicyEarnings oracle_policy_earnings(const TradingReference& reference,
                                      std::span<const float> signal, std::size_t env_count,
                                      std::size_t episodes_per_env, std::uint32_t seed) {
  require(signal.size() == reference.steps(),
          "oracle_policy_earnings: signal has " + std::to_string(signal.size()) +
              " values, the series " + std::to_string(reference.steps()) + " steps");
  require(env_count >= 1, "oracle_policy_earnings: env_count = 0");
  require(episodes_per_env >= 1, "oracle_policy_earnings: episodes_per_env = 0");

  std::mt19937 draws(seed);
  std::vector<std::uint32_t> draw_buffer(env_count);
  const auto next_draws = [&] {
    for (std::uint32_t& d : draw_buffer) d = static_cast<std::uint32_t>(draws());
    return std::span<const std::uint32_t>(draw_buffer);
  };

  TradingBatchState state = reference.reset(next_draws());
  std::vector<std::int32_t> actions(env_count);
  double reward_sum = 0.0;
  std::vector<double> episode_returns;
  const std::size_t steps = episodes_per_env * reference.config().episode_length;
  for (std::size_t step = 0; step < steps; ++step) {
    for (std::size_t n = 0; n < env_count; ++n) {
      const float s = signal[static_cast<std::size_t>(state.start[n] + state.step_in_episode[n])];
      actions[n] = (s > 0.0f ? 1 : s < 0.0f ? -1 : 0) + 1;
    }
    const TradingBatchStep out = reference.step(state, actions, next_draws());
    for (std::size_t n = 0; n < env_count; ++n) {
      reward_sum += static_cast<double>(out.rewards[n]);
      if (out.truncated[n]) episode_returns.push_back(static_cast<double>(out.episode_returns[n]));
    }
  }

  PolicyEarnings earnings;
  earnings.episodes = episode_returns.size();
  earnings.steps = steps * env_count;
  earnings.mean_reward_per_step = reward_sum / static_cast<double>(earnings.steps);
  double return_sum = 0.0;
  for (const double r : episode_returns) return_sum += r;
  earnings.mean_episode_return = return_sum / static_cast<double>(earnings.episodes);
  double squares = 0.0;
  for (const double r : episode_returns)
    squares += (r - earnings.mean_episode_return) * (r - earnings.mean_episode_return);
  earnings.episode_return_standard_error =
      earnings.episodes > 1 ? std::sqrt(squares / static_cast<double>(earnings.episodes - 1) /
                                        static_cast<double>(earnings.episodes))
                            : std::numeric_limits<double>::quiet_NaN();
  return earnings;
}

}  // namespace resident::reference
