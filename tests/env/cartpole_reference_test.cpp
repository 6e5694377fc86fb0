// The CartPole-v1 reference against gym's equations: a first step computed by hand and steps
// evaluated by gym's own Python code, the termination thresholds (strict, on both sides), the
// 500-step truncation, the reset mapping, the auto-resetting batch, and float against double.
#include "tests/reference/cartpole_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

namespace {

using resident::reference::cartpole_batch_observe;
using resident::reference::cartpole_batch_reset;
using resident::reference::cartpole_batch_step;
using resident::reference::cartpole_dynamics;
using resident::reference::cartpole_out_of_bounds;
using resident::reference::cartpole_reset_state;
using resident::reference::cartpole_step;
using resident::reference::CartPoleBatchState;
using resident::reference::CartPoleBatchStep;
using resident::reference::CartPoleConstants;
using resident::reference::CartPoleState;
using resident::reference::kCartPoleMaxEpisodeSteps;

// A linear controller that keeps the pole up (and the cart near the centre) for 500 steps from
// any reset state: push right when theta + 0.5 theta_dot + 0.01 x + 0.05 x_dot > 0.
template <typename Real>
std::int32_t balancing_action(const CartPoleState<Real>& s) {
  const double score = static_cast<double>(s.theta) + 0.5 * static_cast<double>(s.theta_dot) +
                       0.01 * static_cast<double>(s.x) + 0.05 * static_cast<double>(s.x_dot);
  return score > 0.0 ? 1 : 0;
}

CartPoleState<double> to_double(const CartPoleState<float>& s) {
  return {s.x, s.x_dot, s.theta, s.theta_dot};
}

CartPoleState<float> to_float(const CartPoleState<double>& s) {
  return {static_cast<float>(s.x), static_cast<float>(s.x_dot), static_cast<float>(s.theta),
          static_cast<float>(s.theta_dot)};
}

std::array<double, 4> components(const CartPoleState<double>& s) {
  return {s.x, s.x_dot, s.theta, s.theta_dot};
}

// Four 32-bit draws for one reset (mt19937 returns uint_fast32_t).
std::array<std::uint32_t, 4> four_draws(std::mt19937& rng) {
  std::array<std::uint32_t, 4> draws{};
  for (std::uint32_t& d : draws) d = static_cast<std::uint32_t>(rng());
  return draws;
}

void expect_same_state(const CartPoleState<float>& got, const CartPoleState<float>& expected) {
  EXPECT_EQ(got.x, expected.x);
  EXPECT_EQ(got.x_dot, expected.x_dot);
  EXPECT_EQ(got.theta, expected.theta);
  EXPECT_EQ(got.theta_dot, expected.theta_dot);
}

std::array<std::uint32_t, 4> reset_draws_of(const std::vector<std::uint32_t>& draws,
                                            std::size_t env) {
  return {draws[4 * env], draws[4 * env + 1], draws[4 * env + 2], draws[4 * env + 3]};
}

std::vector<std::uint32_t> random_draws(std::mt19937& rng, std::size_t count) {
  std::vector<std::uint32_t> draws(count);
  for (std::uint32_t& d : draws) d = static_cast<std::uint32_t>(rng());
  return draws;
}

// From rest, pushing right: costheta = 1, sintheta = 0, so
//   temp     = 10 / 1.1 = 100/11
//   thetaacc = (0 - 100/11) / (0.5 * (4/3 - 0.1/1.1)) = -(100/11) / (41/66) = -600/41
//   xacc     = 100/11 - 0.05 * (-600/41) / 1.1 = 100/11 + 300/451 = 400/41
// and one Euler step of tau = 0.02 gives x = 0, x_dot = 8/41, theta = 0, theta_dot = -12/41.
// Pushing left mirrors the signs.
TEST(CartPoleReference, FirstStepFromRestMatchesTheHandComputation) {
  for (const std::int32_t action : {1, 0}) {
    const double sign = action == 1 ? 1.0 : -1.0;
    const CartPoleState<double> d = cartpole_dynamics(CartPoleState<double>{}, action);
    EXPECT_EQ(d.x, 0.0);
    EXPECT_NEAR(d.x_dot, sign * 8.0 / 41.0, 1e-16);
    EXPECT_EQ(d.theta, 0.0);
    EXPECT_NEAR(d.theta_dot, sign * -12.0 / 41.0, 1e-16);

    const CartPoleState<float> f = cartpole_dynamics(CartPoleState<float>{}, action);
    EXPECT_EQ(f.x, 0.0f);
    EXPECT_NEAR(f.x_dot, sign * 8.0 / 41.0, 3e-8);  // 2 float ulps at 0.2
    EXPECT_EQ(f.theta, 0.0f);
    EXPECT_NEAR(f.theta_dot, sign * -12.0 / 41.0, 6e-8);
  }
}

// Expected values printed by gym's CartPoleEnv.step equations, copied verbatim into Python
// (euler integrator, Python floats): repr() of each component.
TEST(CartPoleReference, StepsMatchGymsPythonEvaluation) {
  struct Case {
    CartPoleState<double> state;
    std::int32_t action;
    CartPoleState<double> gym_next;
  };
  const Case cases[] = {
      {{0.01, -0.2, 0.05, 0.3}, 0, {0.006, -0.3957976546439626, 0.056, 0.6080233136061515}},
      {{-1.5, 0.7, -0.15, -1.2}, 1, {-1.486, 0.8967096752986646, -0.174, -1.5356860674755026}},
  };
  for (const Case& c : cases) {
    const auto got = components(cartpole_dynamics(c.state, c.action));
    const auto gym = components(c.gym_next);
    for (std::size_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(got[i], gym[i]) << "component " << i;

    // float from the same state rounded to float: within float rounding of gym's values.
    const auto got_float = components(to_double(cartpole_dynamics(to_float(c.state), c.action)));
    for (std::size_t i = 0; i < 4; ++i)
      EXPECT_NEAR(got_float[i], gym[i], 1e-6 + 1e-6 * std::fabs(gym[i])) << "component " << i;
  }
}

template <typename Real>
class CartPoleThresholds : public ::testing::Test {};
using RealTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CartPoleThresholds, RealTypes);

// With zero velocities a step leaves x and theta where they are, so a state exactly on a
// threshold stays on it (not terminated: the comparisons are strict) and one ulp beyond it
// terminates.
TYPED_TEST(CartPoleThresholds, TerminationIsStrictAtBothThresholdsOnBothSides) {
  using Real = TypeParam;
  using C = CartPoleConstants<Real>;
  const Real inf = std::numeric_limits<Real>::infinity();
  EXPECT_EQ(C::theta_threshold, static_cast<Real>(12 * 2 * 3.14159265358979323846 / 360));
  for (const Real sign : {Real(1), Real(-1)}) {
    const Real x_edge = sign * C::x_threshold;
    const Real theta_edge = sign * C::theta_threshold;
    CartPoleState<Real> on_x{x_edge, 0, 0, 0};
    CartPoleState<Real> past_x{std::nextafter(x_edge, sign * inf), 0, 0, 0};
    CartPoleState<Real> on_theta{0, 0, theta_edge, 0};
    CartPoleState<Real> past_theta{0, 0, std::nextafter(theta_edge, sign * inf), 0};

    const auto on_x_step = cartpole_step(on_x, 0, 1);
    EXPECT_EQ(on_x_step.state.x, x_edge);
    EXPECT_FALSE(on_x_step.terminated) << "x = " << x_edge;
    EXPECT_TRUE(cartpole_step(past_x, 0, 1).terminated) << "x past " << x_edge;

    const auto on_theta_step = cartpole_step(on_theta, 0, 1);
    EXPECT_EQ(on_theta_step.state.theta, theta_edge);
    EXPECT_FALSE(on_theta_step.terminated) << "theta = " << theta_edge;
    EXPECT_TRUE(cartpole_step(past_theta, 0, 1).terminated) << "theta past " << theta_edge;
  }
}

// Termination is judged on the state after the step: a cart at 2.39 moving at 1 m/s
// crosses 2.4 within one step of 0.02 s.
TYPED_TEST(CartPoleThresholds, TerminationIsJudgedOnTheNewState) {
  using Real = TypeParam;
  const CartPoleState<Real> before{Real(2.39), Real(1.0), 0, 0};
  EXPECT_FALSE(cartpole_out_of_bounds(before));
  const auto step = cartpole_step(before, 10, 1);
  EXPECT_GT(step.state.x, Real(2.4));
  EXPECT_TRUE(step.terminated);
  EXPECT_FALSE(step.truncated);
  EXPECT_EQ(step.elapsed_steps, 11);
}

TYPED_TEST(CartPoleThresholds, TruncationAtTheFiveHundredthStep) {
  using Real = TypeParam;
  const CartPoleState<Real> upright{};
  const auto step_499 = cartpole_step(upright, kCartPoleMaxEpisodeSteps - 2, 1);
  EXPECT_EQ(step_499.elapsed_steps, 499);
  EXPECT_FALSE(step_499.truncated);
  const auto step_500 = cartpole_step(upright, kCartPoleMaxEpisodeSteps - 1, 1);
  EXPECT_EQ(step_500.elapsed_steps, 500);
  EXPECT_TRUE(step_500.truncated);
  EXPECT_FALSE(step_500.terminated);

  // Both at once, as gym's TimeLimit reports them.
  const CartPoleState<Real> falling{0, 0, CartPoleConstants<Real>::theta_threshold, Real(1.0)};
  const auto both = cartpole_step(falling, kCartPoleMaxEpisodeSteps - 1, 1);
  EXPECT_TRUE(both.terminated);
  EXPECT_TRUE(both.truncated);
}

TEST(CartPoleReference, ActionsOtherThanZeroOrOneAreRejected) {
  EXPECT_THROW(cartpole_dynamics(CartPoleState<float>{}, 2), std::invalid_argument);
  EXPECT_THROW(cartpole_dynamics(CartPoleState<double>{}, -1), std::invalid_argument);
}

// u = (d >> 8) * 2^-24 and -0.05 + 0.1 u: the draw 0 gives the low end exactly, 2^31 the
// centre exactly, and the largest draw stays inside the interval.
TEST(CartPoleReference, ResetMapsDrawsIntoTheInterval) {
  const auto low = cartpole_reset_state<float>({0u, 0u, 0u, 0u});
  EXPECT_EQ(low.x, -0.05f);
  EXPECT_EQ(low.theta_dot, -0.05f);
  const auto centre = cartpole_reset_state<float>({0x80000000u, 0x80000000u, 0u, 0u});
  EXPECT_EQ(centre.x, 0.0f);
  EXPECT_EQ(centre.x_dot, 0.0f);
  EXPECT_EQ(centre.theta, -0.05f);
  const auto high =
      cartpole_reset_state<float>({0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu});
  EXPECT_LE(high.x, 0.05f);
  EXPECT_GT(high.x, 0.0499999f);
  // The low byte of a draw is not used.
  EXPECT_EQ(cartpole_reset_state<float>({0x123456FFu, 0, 0, 0}).x,
            cartpole_reset_state<float>({0x12345600u, 0, 0, 0}).x);

  std::mt19937 draws(7);
  float lowest = 1.0f;
  float highest = -1.0f;
  for (int i = 0; i < 10000; ++i) {
    const auto s = cartpole_reset_state<float>(four_draws(draws));
    for (const float v : {s.x, s.x_dot, s.theta, s.theta_dot}) {
      lowest = std::min(lowest, v);
      highest = std::max(highest, v);
    }
  }
  EXPECT_GE(lowest, -0.05f);
  EXPECT_LE(highest, 0.05f);
  EXPECT_LT(lowest, -0.0499f);  // the draws cover the interval
  EXPECT_GT(highest, 0.0499f);
}

// The balancing controller survives every episode, so each env is truncated exactly at steps
// 500 and 1000 and never terminated; after the truncation the env starts over from the reset
// state of its draws and the final observation is the state the 500th step reached.
TEST(CartPoleReferenceBatch, BalancedEpisodesAreTruncatedAtFiveHundredAndReset) {
  constexpr std::size_t kEnvs = 6;
  std::mt19937 rng(11);
  CartPoleBatchState batch = cartpole_batch_reset(random_draws(rng, 4 * kEnvs));
  std::vector<std::int32_t> actions(kEnvs);
  for (int step = 1; step <= 1000; ++step) {
    std::vector<CartPoleState<float>> before(kEnvs);
    for (std::size_t n = 0; n < kEnvs; ++n) {
      before[n] = batch.state(n);
      actions[n] = balancing_action(before[n]);
    }
    const std::vector<std::uint32_t> reset_draws = random_draws(rng, 4 * kEnvs);
    const CartPoleBatchStep out = cartpole_batch_step(batch, actions, reset_draws);
    const bool episode_end = step % kCartPoleMaxEpisodeSteps == 0;
    for (std::size_t n = 0; n < kEnvs; ++n) {
      ASSERT_EQ(out.terminated[n], 0) << "env " << n << " fell at step " << step;
      ASSERT_EQ(out.truncated[n], episode_end ? 1 : 0) << "env " << n << " step " << step;
      EXPECT_EQ(out.rewards[n], 1.0f);
      const CartPoleState<float> reached = cartpole_dynamics(before[n], actions[n]);
      if (!episode_end) {
        EXPECT_TRUE(std::isnan(out.final_observations[4 * n]));
        EXPECT_TRUE(std::isnan(out.episode_returns[n]));
        expect_same_state(batch.state(n), reached);
        EXPECT_EQ(batch.elapsed_steps[n], step % kCartPoleMaxEpisodeSteps);
        continue;
      }
      EXPECT_EQ(out.final_observations[4 * n + 0], reached.x);
      EXPECT_EQ(out.final_observations[4 * n + 1], reached.x_dot);
      EXPECT_EQ(out.final_observations[4 * n + 2], reached.theta);
      EXPECT_EQ(out.final_observations[4 * n + 3], reached.theta_dot);
      EXPECT_EQ(out.episode_returns[n], 500.0f);
      expect_same_state(batch.state(n),
                        cartpole_reset_state<float>(reset_draws_of(reset_draws, n)));
      EXPECT_EQ(batch.elapsed_steps[n], 0);
      EXPECT_EQ(batch.episode_return[n], 0.0f);
    }
  }
}

// Always pushing right drops the pole within a few dozen steps: each such episode ends
// terminated (not truncated), its return is its length, its final observation is out of
// bounds, and the next observation is the reset state.
TEST(CartPoleReferenceBatch, FallingEpisodesTerminateWithTheirLengthAsReturn) {
  constexpr std::size_t kEnvs = 3;
  std::mt19937 rng(5);
  CartPoleBatchState batch = cartpole_batch_reset(random_draws(rng, 4 * kEnvs));
  const std::vector<std::int32_t> push_right(kEnvs, 1);
  std::vector<int> episode_length(kEnvs, 0);
  int terminations = 0;
  for (int step = 0; step < 300; ++step) {
    const std::vector<std::uint32_t> reset_draws = random_draws(rng, 4 * kEnvs);
    const CartPoleBatchStep out = cartpole_batch_step(batch, push_right, reset_draws);
    std::vector<float> observations(4 * kEnvs);
    cartpole_batch_observe(batch, observations);
    for (std::size_t n = 0; n < kEnvs; ++n) {
      ++episode_length[n];
      if (!out.terminated[n]) continue;
      ++terminations;
      EXPECT_EQ(out.truncated[n], 0);
      EXPECT_LT(episode_length[n], 100);
      EXPECT_EQ(out.episode_returns[n], static_cast<float>(episode_length[n]));
      const CartPoleState<float> final_state{
          out.final_observations[4 * n], out.final_observations[4 * n + 1],
          out.final_observations[4 * n + 2], out.final_observations[4 * n + 3]};
      EXPECT_TRUE(cartpole_out_of_bounds(final_state));
      expect_same_state({observations[4 * n], observations[4 * n + 1], observations[4 * n + 2],
                         observations[4 * n + 3]},
                        cartpole_reset_state<float>(reset_draws_of(reset_draws, n)));
      episode_length[n] = 0;
    }
  }
  EXPECT_GE(terminations, 9);
}

TEST(CartPoleReferenceBatch, RejectsBadSizesAndActions) {
  EXPECT_THROW(cartpole_batch_reset(std::vector<std::uint32_t>(6)), std::invalid_argument);
  EXPECT_THROW(cartpole_batch_reset({}), std::invalid_argument);
  CartPoleBatchState batch = cartpole_batch_reset(std::vector<std::uint32_t>(8));
  EXPECT_THROW(
      cartpole_batch_step(batch, std::vector<std::int32_t>{1}, std::vector<std::uint32_t>(8)),
      std::invalid_argument);
  EXPECT_THROW(
      cartpole_batch_step(batch, std::vector<std::int32_t>{1, 2}, std::vector<std::uint32_t>(8)),
      std::invalid_argument);
  std::vector<float> too_small(7);
  EXPECT_THROW(cartpole_batch_observe(batch, too_small), std::invalid_argument);
}

// float against double over 200 steps of the balancing controller (actions chosen on the double
// trajectory and applied to both), from 20 reset states.
//  - One step: the float step from the double state rounded to float, against the double step
//    from that same state. Tolerance |f - d| <= 2.5e-7 (1 + |d|): the float step's rounding,
//    about one float ulp of a component of magnitude 1 to 2 (ulp(1) = 1.2e-7) plus the rounding
//    of the accelerations it adds.
//  - Free-running: the float trajectory against the double one. The upright pole is unstable
//    (linearized: theta'' = g / (l (4/3 - mp/M)) theta, growth rate lambda = 3.97 / s), so a
//    difference grows like exp(lambda tau t): tolerance (5e-7 + 5e-8 exp(lambda tau t))
//    (1 + |d|), about 2e-6 at t = 50, 1.3e-4 at t = 100 and 0.3 at t = 200.
TEST(CartPoleReference, FloatAgreesWithDoubleOverTwoHundredSteps) {
  using C = CartPoleConstants<double>;
  const double growth_rate =
      std::sqrt(C::gravity / (C::length * (C::four_thirds - C::masspole / C::total_mass)));
  std::mt19937 rng(2024);
  double worst_one_step_share = 0.0;
  double worst_free_running_share = 0.0;
  for (int trial = 0; trial < 20; ++trial) {
    const CartPoleState<float> reset = cartpole_reset_state<float>(four_draws(rng));
    CartPoleState<double> d = to_double(reset);
    CartPoleState<float> f = reset;
    for (int t = 1; t <= 200; ++t) {
      const std::int32_t action = balancing_action(d);
      const CartPoleState<float> resynced = to_float(d);
      const auto one_step_float = components(to_double(cartpole_dynamics(resynced, action)));
      const auto one_step_double = components(cartpole_dynamics(to_double(resynced), action));
      d = cartpole_dynamics(d, action);
      f = cartpole_dynamics(f, action);
      ASSERT_FALSE(cartpole_out_of_bounds(d)) << "trial " << trial << " step " << t;
      const auto free_float = components(to_double(f));
      const auto free_double = components(d);
      const double envelope = 5e-7 + 5e-8 * std::exp(growth_rate * C::tau * t);
      for (std::size_t i = 0; i < 4; ++i) {
        const double one_step_tolerance = 2.5e-7 + 2.5e-7 * std::fabs(one_step_double[i]);
        const double one_step_share =
            std::fabs(one_step_float[i] - one_step_double[i]) / one_step_tolerance;
        EXPECT_LE(one_step_share, 1.0) << "trial " << trial << " step " << t << " component " << i;
        worst_one_step_share = std::max(worst_one_step_share, one_step_share);
        const double free_tolerance = envelope * (1.0 + std::fabs(free_double[i]));
        const double free_share = std::fabs(free_float[i] - free_double[i]) / free_tolerance;
        EXPECT_LE(free_share, 1.0) << "trial " << trial << " step " << t << " component " << i;
        worst_free_running_share = std::max(worst_free_running_share, free_share);
      }
    }
  }
  std::printf("float vs double: one step uses %.1f%% of its tolerance, free-running %.1f%%\n",
              100.0 * worst_one_step_share, 100.0 * worst_free_running_share);
}

}  // namespace
