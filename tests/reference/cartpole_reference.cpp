#include "tests/reference/cartpole_reference.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace resident::reference {

// The float constants are the float literals a CUDA kernel would write.
static_assert(CartPoleConstants<float>::gravity == 9.8f);
static_assert(CartPoleConstants<float>::total_mass == 1.1f);
static_assert(CartPoleConstants<float>::polemass_length == 0.05f);
static_assert(CartPoleConstants<float>::tau == 0.02f);
static_assert(CartPoleConstants<float>::four_thirds == 4.0f / 3.0f);
static_assert(CartPoleConstants<float>::theta_threshold == 0.2094395102f);
static_assert(CartPoleConstants<float>::x_threshold == 2.4f);

namespace {

void check_action(std::int32_t action) {
  if (action != 0 && action != 1)
    throw std::invalid_argument("CartPole action " + std::to_string(action) +
                                ", allowed 0 (push left) or 1 (push right)");
}

// u = (draw >> 8) * 2^-24: the top 24 bits, exact in float, in [0, 1 - 2^-24].
float unit_uniform_24(std::uint32_t draw) { return static_cast<float>(draw >> 8) * 0x1.0p-24f; }

}  // namespace

template <typename Real>
CartPoleState<Real> cartpole_dynamics(const CartPoleState<Real>& state, std::int32_t action) {
  check_action(action);
  using C = CartPoleConstants<Real>;
  const Real force = action == 1 ? C::force_mag : -C::force_mag;
  const Real costheta = static_cast<Real>(std::cos(static_cast<double>(state.theta)));
  const Real sintheta = static_cast<Real>(std::sin(static_cast<double>(state.theta)));
  const Real temp =
      (force + (C::polemass_length * (state.theta_dot * state.theta_dot)) * sintheta) /
      C::total_mass;
  const Real thetaacc =
      (C::gravity * sintheta - costheta * temp) /
      (C::length * (C::four_thirds - (C::masspole * (costheta * costheta)) / C::total_mass));
  const Real xacc = temp - ((C::polemass_length * thetaacc) * costheta) / C::total_mass;
  CartPoleState<Real> next;
  next.x = state.x + C::tau * state.x_dot;
  next.x_dot = state.x_dot + C::tau * xacc;
  next.theta = state.theta + C::tau * state.theta_dot;
  next.theta_dot = state.theta_dot + C::tau * thetaacc;
  return next;
}

template <typename Real>
bool cartpole_out_of_bounds(const CartPoleState<Real>& state) {
  using C = CartPoleConstants<Real>;
  return state.x < -C::x_threshold || state.x > C::x_threshold ||
         state.theta < -C::theta_threshold || state.theta > C::theta_threshold;
}

template <typename Real>
CartPoleStep<Real> cartpole_step(const CartPoleState<Real>& state, std::int32_t elapsed_steps,
                                 std::int32_t action) {
  CartPoleStep<Real> step;
  step.state = cartpole_dynamics(state, action);
  step.elapsed_steps = elapsed_steps + 1;
  step.terminated = cartpole_out_of_bounds(step.state);
  step.truncated = step.elapsed_steps >= kCartPoleMaxEpisodeSteps;
  return step;
}

template <typename Real>
CartPoleState<Real> cartpole_reset_state(std::array<std::uint32_t, kCartPoleResetDraws> draws) {
  const auto component = [](std::uint32_t draw) {
    return Real(-0.05) + Real(0.1) * static_cast<Real>(unit_uniform_24(draw));
  };
  return {component(draws[0]), component(draws[1]), component(draws[2]), component(draws[3])};
}

template CartPoleState<float> cartpole_dynamics(const CartPoleState<float>&, std::int32_t);
template CartPoleState<double> cartpole_dynamics(const CartPoleState<double>&, std::int32_t);
template bool cartpole_out_of_bounds(const CartPoleState<float>&);
template bool cartpole_out_of_bounds(const CartPoleState<double>&);
template CartPoleStep<float> cartpole_step(const CartPoleState<float>&, std::int32_t, std::int32_t);
template CartPoleStep<double> cartpole_step(const CartPoleState<double>&, std::int32_t,
                                            std::int32_t);
template CartPoleState<float> cartpole_reset_state(std::array<std::uint32_t, 4>);
template CartPoleState<double> cartpole_reset_state(std::array<std::uint32_t, 4>);

// ---------------------------------------------------------------------------------------------
// Batch

CartPoleState<float> CartPoleBatchState::state(std::size_t env) const {
  return {x.at(env), x_dot.at(env), theta.at(env), theta_dot.at(env)};
}

void CartPoleBatchState::set_state(std::size_t env, const CartPoleState<float>& state) {
  x.at(env) = state.x;
  x_dot.at(env) = state.x_dot;
  theta.at(env) = state.theta;
  theta_dot.at(env) = state.theta_dot;
}

namespace {

std::array<std::uint32_t, kCartPoleResetDraws> draws_of(std::span<const std::uint32_t> draws,
                                                        std::size_t env) {
  const std::size_t first = env * kCartPoleResetDraws;
  return {draws[first], draws[first + 1], draws[first + 2], draws[first + 3]};
}

}  // namespace

CartPoleBatchState cartpole_batch_reset(std::span<const std::uint32_t> draws) {
  if (draws.empty() || draws.size() % kCartPoleResetDraws != 0)
    throw std::invalid_argument("cartpole_batch_reset: " + std::to_string(draws.size()) +
                                " draws, need a positive multiple of 4");
  const std::size_t env_count = draws.size() / kCartPoleResetDraws;
  CartPoleBatchState batch;
  batch.x.resize(env_count);
  batch.x_dot.resize(env_count);
  batch.theta.resize(env_count);
  batch.theta_dot.resize(env_count);
  batch.elapsed_steps.assign(env_count, 0);
  batch.episode_return.assign(env_count, 0.0f);
  for (std::size_t n = 0; n < env_count; ++n)
    batch.set_state(n, cartpole_reset_state<float>(draws_of(draws, n)));
  return batch;
}

void cartpole_batch_observe(const CartPoleBatchState& state, std::span<float> observations) {
  const std::size_t env_count = state.env_count();
  if (observations.size() != env_count * kCartPoleObservationSize)
    throw std::invalid_argument("cartpole_batch_observe: observations hold " +
                                std::to_string(observations.size()) + " floats, need " +
                                std::to_string(env_count * kCartPoleObservationSize));
  for (std::size_t n = 0; n < env_count; ++n) {
    float* row = &observations[n * kCartPoleObservationSize];
    row[0] = state.x[n];
    row[1] = state.x_dot[n];
    row[2] = state.theta[n];
    row[3] = state.theta_dot[n];
  }
}

CartPoleBatchStep cartpole_batch_step(CartPoleBatchState& state,
                                      std::span<const std::int32_t> actions,
                                      std::span<const std::uint32_t> reset_draws) {
  const std::size_t env_count = state.env_count();
  if (actions.size() != env_count || reset_draws.size() != env_count * kCartPoleResetDraws)
    throw std::invalid_argument("cartpole_batch_step: " + std::to_string(env_count) +
                                " envs need " + std::to_string(env_count) + " actions and " +
                                std::to_string(env_count * kCartPoleResetDraws) +
                                " reset draws, got " + std::to_string(actions.size()) + " and " +
                                std::to_string(reset_draws.size()));
  for (const std::int32_t action : actions) check_action(action);

  const float nan = std::numeric_limits<float>::quiet_NaN();
  CartPoleBatchStep out;
  out.rewards.assign(env_count, 1.0f);
  out.terminated.assign(env_count, 0);
  out.truncated.assign(env_count, 0);
  out.final_observations.assign(env_count * kCartPoleObservationSize, nan);
  out.episode_returns.assign(env_count, nan);
  for (std::size_t n = 0; n < env_count; ++n) {
    const CartPoleStep<float> step =
        cartpole_step(state.state(n), state.elapsed_steps[n], actions[n]);
    state.elapsed_steps[n] = step.elapsed_steps;
    state.episode_return[n] += 1.0f;
    out.terminated[n] = step.terminated ? 1 : 0;
    out.truncated[n] = step.truncated ? 1 : 0;
    if (!step.terminated && !step.truncated) {
      state.set_state(n, step.state);
      continue;
    }
    float* final_row = &out.final_observations[n * kCartPoleObservationSize];
    final_row[0] = step.state.x;
    final_row[1] = step.state.x_dot;
    final_row[2] = step.state.theta;
    final_row[3] = step.state.theta_dot;
    out.episode_returns[n] = state.episode_return[n];
    state.set_state(n, cartpole_reset_state<float>(draws_of(reset_draws, n)));
    state.elapsed_steps[n] = 0;
    state.episode_return[n] = 0.0f;
  }
  return out;
}

}  // namespace resident::reference
