// CartPole-v1 on the CPU: the oracle of the GPU CartPole environment. The dynamics
// are gym's CartPoleEnv.step with the "euler" kinematics integrator, the TimeLimit of 500
// steps, and a reset state uniform in [-0.05, 0.05]^4. They are defined for Real = float (the
// GPU's precision; a kernel that follows the order below matches it bit for bit) and for
// Real = double (gym computes in Python floats, i.e. double; the tolerance check).
//
// Constants, each a Real, derived in Real as gym derives them:
//   gravity = 9.8, masscart = 1.0, masspole = 0.1, total_mass = masspole + masscart,
//   length = 0.5 (half the pole's length), polemass_length = masspole * length,
//   force_mag = 10.0, tau = 0.02, four_thirds = 4 / 3 (one division in Real),
//   theta_threshold = Real(12 * 2 * pi / 360) (evaluated in double left to right, then rounded),
//   x_threshold = 2.4.
//
// One step, action 1 pushes right and 0 left. Each operator is one IEEE operation in Real,
// rounded to nearest, evaluated as parenthesized; no fused multiply-add (a CUDA kernel uses
// __fmul_rn, __fadd_rn, __fsub_rn, or compiles with -fmad=false; '/' is IEEE division by
// default):
//   force     = action == 1 ? force_mag : -force_mag
//   costheta  = Real(cos(double(theta)))     sin and cos in double, rounded to Real (*)
//   sintheta  = Real(sin(double(theta)))
//   temp      = (polemass_length * (theta_dot * theta_dot)) * sintheta
//   temp      = (force + temp) / total_mass
//   thetaacc  = (gravity * sintheta - costheta * temp)
//               / (length * (four_thirds - (masspole * (costheta * costheta)) / total_mass))
//   xacc      = temp - ((polemass_length * thetaacc) * costheta) / total_mass
//   x         = x + tau * x_dot
//   x_dot     = x_dot + tau * xacc
//   theta     = theta + tau * theta_dot
//   theta_dot = theta_dot + tau * thetaacc
// which is gym's Python read with its precedence (`**` before `*` and `/`, then left to
// right): `polemass_length * theta_dot**2 * sintheta` is (pml * td^2) * sin, and
// `masspole * costheta**2 / total_mass` is (mp * c^2) / M; td^2 is computed as td * td. In
// thetaacc, gravity * sintheta and costheta * temp are each rounded before the subtraction.
//   terminated = x < -x_threshold || x > x_threshold
//                || theta < -theta_threshold || theta > theta_threshold
//                (strict comparisons, on the state after the step)
//   reward     = 1 on every step, the terminating one included
//   truncated  = elapsed_steps >= 500 after the step counts itself (gym's TimeLimit; both flags
//                can be set on the same step, and a consumer bootstraps only when
//                truncated && !terminated)
// (*) CUDA's sinf/cosf have up to 2 ulp error and glibc's round differently: they disagree
// often. CUDA's and glibc's double sin/cos are both within 2 double ulps of the exact value, so
// their roundings to float agree unless the exact value lies within 2^-51 (relative) of a
// midpoint between two floats: about one call in 2^27.
//
// Reset: four 32-bit draws d_i (the caller's random stream; on the GPU, raw Philox output)
// give u_i = float(d_i >> 8) * 2^-24, exact, in [0, 1 - 2^-24], and the state components
// (x, x_dot, theta, theta_dot)_i = Real(-0.05) + Real(0.1) * Real(u_i) (multiply, round, add,
// round), in [-0.05, 0.05].
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <span>
#include <vector>

namespace resident::reference {

inline constexpr std::int32_t kCartPoleMaxEpisodeSteps = 500;
inline constexpr std::size_t kCartPoleObservationSize = 4;  // x, x_dot, theta, theta_dot
inline constexpr std::size_t kCartPoleResetDraws = 4;

template <typename Real>
struct CartPoleState {
  Real x = 0;
  Real x_dot = 0;
  Real theta = 0;
  Real theta_dot = 0;
};

// The constants above, in Real.
template <typename Real>
struct CartPoleConstants {
  static constexpr Real gravity = Real(9.8);
  static constexpr Real masscart = Real(1.0);
  static constexpr Real masspole = Real(0.1);
  static constexpr Real total_mass = masspole + masscart;
  static constexpr Real length = Real(0.5);
  static constexpr Real polemass_length = masspole * length;
  static constexpr Real force_mag = Real(10.0);
  static constexpr Real tau = Real(0.02);
  static constexpr Real four_thirds = Real(4.0) / Real(3.0);
  static constexpr Real theta_threshold = Real(12 * 2 * std::numbers::pi / 360);
  static constexpr Real x_threshold = Real(2.4);
};

// The state after one step from `state` with `action` (0 or 1; anything else throws
// std::invalid_argument), by the operations above.
template <typename Real>
CartPoleState<Real> cartpole_dynamics(const CartPoleState<Real>& state, std::int32_t action);

// True when `state` is outside the thresholds (strict comparisons, as above).
template <typename Real>
bool cartpole_out_of_bounds(const CartPoleState<Real>& state);

template <typename Real>
struct CartPoleStep {
  CartPoleState<Real> state;       // after the step
  std::int32_t elapsed_steps = 0;  // steps of the episode so far, this one included
  bool terminated = false;
  bool truncated = false;
};

// One step of one environment that has taken `elapsed_steps` steps of its episode so far.
template <typename Real>
CartPoleStep<Real> cartpole_step(const CartPoleState<Real>& state, std::int32_t elapsed_steps,
                                 std::int32_t action);

// The reset state from four draws, as above.
template <typename Real>
CartPoleState<Real> cartpole_reset_state(std::array<std::uint32_t, kCartPoleResetDraws> draws);

extern template CartPoleState<float> cartpole_dynamics(const CartPoleState<float>&, std::int32_t);
extern template CartPoleState<double> cartpole_dynamics(const CartPoleState<double>&, std::int32_t);
extern template bool cartpole_out_of_bounds(const CartPoleState<float>&);
extern template bool cartpole_out_of_bounds(const CartPoleState<double>&);
extern template CartPoleStep<float> cartpole_step(const CartPoleState<float>&, std::int32_t,
                                                  std::int32_t);
extern template CartPoleStep<double> cartpole_step(const CartPoleState<double>&, std::int32_t,
                                                   std::int32_t);
extern template CartPoleState<float> cartpole_reset_state(std::array<std::uint32_t, 4>);
extern template CartPoleState<double> cartpole_reset_state(std::array<std::uint32_t, 4>);

// ---------------------------------------------------------------------------------------------
// N environments stepping together in float with auto-reset: what the GPU kernel does, one
// thread per environment.

// Struct of arrays, [N] each.
struct CartPoleBatchState {
  std::vector<float> x;
  std::vector<float> x_dot;
  std::vector<float> theta;
  std::vector<float> theta_dot;
  std::vector<std::int32_t> elapsed_steps;  // steps of the current episode so far
  std::vector<float> episode_return;        // rewards of the current episode so far, summed

  std::size_t env_count() const { return x.size(); }
  CartPoleState<float> state(std::size_t env) const;
  void set_state(std::size_t env, const CartPoleState<float>& state);
};

// Outputs of one batch step, [N] (final_observations [N, 4]).
struct CartPoleBatchStep {
  std::vector<float> rewards;             // 1
  std::vector<std::uint8_t> terminated;   // 0 or 1
  std::vector<std::uint8_t> truncated;    // 0 or 1
  std::vector<float> final_observations;  // the state the step reached where the episode
                                          // ended (terminated or truncated), NaN elsewhere
  std::vector<float> episode_returns;     // the ended episode's return, NaN elsewhere
};

// N = draws.size() / 4 environments, env n reset from draws[4n .. 4n + 3]; elapsed_steps and
// episode_return 0. Throws std::invalid_argument when draws.size() is not a positive multiple
// of 4.
CartPoleBatchState cartpole_batch_reset(std::span<const std::uint32_t> draws);

// observations [N, 4]: row n = (x, x_dot, theta, theta_dot) of env n.
void cartpole_batch_observe(const CartPoleBatchState& state, std::span<float> observations);

// For each env n, independently:
//   1. next = cartpole_dynamics(state n, actions[n])
//   2. elapsed_steps += 1; episode_return += 1.0f; reward = 1.0f
//   3. terminated = cartpole_out_of_bounds(next); truncated = elapsed_steps >= 500
//   4. if terminated or truncated: final_observations row n = next; episode_returns[n] =
//      episode_return; state n = cartpole_reset_state(reset_draws[4n .. 4n + 3]);
//      elapsed_steps = 0; episode_return = 0. Otherwise state n = next.
// reset_draws [N, 4] are read only for the environments that reset. Throws
// std::invalid_argument for a size mismatch or an action other than 0 or 1.
CartPoleBatchStep cartpole_batch_step(CartPoleBatchState& state,
                                      std::span<const std::int32_t> actions,
                                      std::span<const std::uint32_t> reset_draws);

}  // namespace resident::reference
