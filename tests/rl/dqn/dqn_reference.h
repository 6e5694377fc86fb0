// Double-precision (and integer) CPU references of the DQN kernels (kernels/rl/dqn): the oracles
// of tests/rl/dqn/dqn_kernels_test.cu. Same shapes and rules as the kernels' contracts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace resident::reference::dqn {

// First index of the largest value, NaN never wins; all NaN: 0.
std::size_t argmax(std::span<const double> row);

double epsilon_at(double start, double end, std::uint64_t decay_env_steps, std::uint64_t t);

// actions [N] for q [N, A] at vector step `step` with Philox seed `seed`.
std::vector<std::int32_t> epsilon_greedy(std::span<const double> q, std::size_t n, std::size_t a,
                                         double eps_start, double eps_end,
                                         std::uint64_t decay_env_steps, std::uint64_t step,
                                         std::uint64_t seed);

std::vector<double> double_dqn_target(std::span<const double> q_online_next,
                                      std::span<const double> q_target_next,
                                      std::span<const double> rewards,
                                      std::span<const std::uint8_t> dones, std::size_t a,
                                      double discount, double reward_scale);

struct TdError {
  std::vector<double> q_taken, td;
};
TdError td_error(std::span<const double> q, std::span<const std::int32_t> actions,
                 std::span<const double> targets, std::size_t a);

std::vector<double> action_value_grad(std::span<const double> d_q_taken,
                                      std::span<const std::int32_t> actions, std::size_t a);

std::vector<double> dueling_forward(std::span<const double> head, std::size_t b, std::size_t a);
std::vector<double> dueling_backward(std::span<const double> d_q, std::size_t b, std::size_t a);

// target after one update at `step` (no change unless step % period == 0).
std::vector<double> target_update(std::span<const double> target, std::span<const double> online,
                                  double tau, std::uint64_t period, std::uint64_t step);

struct Transitions {
  std::vector<double> states, next_states, current;
  std::vector<std::uint8_t> dones;
};
// terminated / truncated may be empty (never); final_observations empty: next_observations.
Transitions transition_assembly(std::span<const double> current, std::span<const double> observations,
                                std::span<const double> next_observations,
                                std::span<const double> final_observations,
                                std::span<const std::uint8_t> terminated,
                                std::span<const std::uint8_t> truncated, std::size_t n,
                                std::size_t d);

struct Tracker {
  std::vector<double> running;  // [N]
  std::vector<double> ring;     // [R]
  std::uint64_t episodes = 0, vector_steps = 0, epoch_episodes = 0;
  double epoch_return_sum = 0.0;
};
// One tracker step (episodes appended in env order).
void episode_tracker_step(Tracker& tracker, std::span<const double> rewards,
                          std::span<const std::uint8_t> terminated,
                          std::span<const std::uint8_t> truncated);
// Mean of the last min(R, episodes) returns (NaN when none).
double recent_mean(const Tracker& tracker);

}  // namespace resident::reference::dqn
