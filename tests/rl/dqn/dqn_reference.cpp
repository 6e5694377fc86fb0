#include "tests/rl/dqn/dqn_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/reference/philox_reference.h"

namespace resident::reference::dqn {

std::size_t argmax(std::span<const double> row) {
  std::size_t best = 0;
  bool found = false;
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (std::isnan(row[i])) continue;
    if (!found || row[i] > row[best]) {
      best = i;
      found = true;
    }
  }
  return best;
}

double epsilon_at(double start, double end, std::uint64_t decay, std::uint64_t t) {
  if (decay == 0 || t >= decay) return end;
  return start + (end - start) * (static_cast<double>(t) / static_cast<double>(decay));
}

std::vector<std::int32_t> epsilon_greedy(std::span<const double> q, std::size_t n, std::size_t a,
                                         double eps_start, double eps_end, std::uint64_t decay,
                                         std::uint64_t step, std::uint64_t seed) {
  const double eps = epsilon_at(eps_start, eps_end, decay, step * n);
  std::vector<std::int32_t> actions(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t d0 = curand_philox_draw(seed, i, 4 * step, 0);
    const std::uint32_t d1 = curand_philox_draw(seed, i, 4 * step, 1);
    const double u0 = static_cast<double>(d0 >> 8) * 0x1.0p-24;
    const double u1 = static_cast<double>(d1 >> 8) * 0x1.0p-24;
    if (u0 < eps)
      actions[i] = static_cast<std::int32_t>(
          std::min<std::size_t>(static_cast<std::size_t>(u1 * static_cast<double>(a)), a - 1));
    else
      actions[i] = static_cast<std::int32_t>(argmax(q.subspan(i * a, a)));
  }
  return actions;
}

std::vector<double> double_dqn_target(std::span<const double> q_online_next,
                                      std::span<const double> q_target_next,
                                      std::span<const double> rewards,
                                      std::span<const std::uint8_t> dones, std::size_t a,
                                      double discount, double reward_scale) {
  std::vector<double> y(rewards.size());
  for (std::size_t b = 0; b < y.size(); ++b) {
    const std::size_t best = argmax(q_online_next.subspan(b * a, a));
    y[b] = reward_scale * rewards[b] + (dones[b] ? 0.0 : discount * q_target_next[b * a + best]);
  }
  return y;
}

TdError td_error(std::span<const double> q, std::span<const std::int32_t> actions,
                 std::span<const double> targets, std::size_t a) {
  TdError out;
  for (std::size_t b = 0; b < actions.size(); ++b) {
    const double qt = q[b * a + static_cast<std::size_t>(actions[b])];
    out.q_taken.push_back(qt);
    out.td.push_back(targets[b] - qt);
  }
  return out;
}

std::vector<double> action_value_grad(std::span<const double> d_q_taken,
                                      std::span<const std::int32_t> actions, std::size_t a) {
  std::vector<double> out(actions.size() * a, 0.0);
  for (std::size_t b = 0; b < actions.size(); ++b)
    out[b * a + static_cast<std::size_t>(actions[b])] = d_q_taken[b];
  return out;
}

std::vector<double> dueling_forward(std::span<const double> head, std::size_t b, std::size_t a) {
  std::vector<double> q(b * a);
  for (std::size_t r = 0; r < b; ++r) {
    const double* h = head.data() + r * (a + 1);
    double mean = 0.0;
    for (std::size_t i = 0; i < a; ++i) mean += h[1 + i];
    mean /= static_cast<double>(a);
    for (std::size_t i = 0; i < a; ++i) q[r * a + i] = h[0] + h[1 + i] - mean;
  }
  return q;
}

std::vector<double> dueling_backward(std::span<const double> d_q, std::size_t b, std::size_t a) {
  std::vector<double> out(b * (a + 1));
  for (std::size_t r = 0; r < b; ++r) {
    double sum = 0.0;
    for (std::size_t i = 0; i < a; ++i) sum += d_q[r * a + i];
    out[r * (a + 1)] = sum;
    for (std::size_t i = 0; i < a; ++i)
      out[r * (a + 1) + 1 + i] = d_q[r * a + i] - sum / static_cast<double>(a);
  }
  return out;
}

std::vector<double> target_update(std::span<const double> target, std::span<const double> online,
                                  double tau, std::uint64_t period, std::uint64_t step) {
  std::vector<double> out(target.begin(), target.end());
  if (step % period != 0) return out;
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = tau == 1.0 ? online[i] : (1.0 - tau) * target[i] + tau * online[i];
  return out;
}

Transitions transition_assembly(std::span<const double> current, std::span<const double> observations,
                                std::span<const double> next_observations,
                                std::span<const double> final_observations,
                                std::span<const std::uint8_t> terminated,
                                std::span<const std::uint8_t> truncated, std::size_t n,
                                std::size_t d) {
  Transitions t;
  t.states.assign(current.begin(), current.end());
  t.current.assign(observations.begin(), observations.end());
  t.next_states.resize(n * d);
  t.dones.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const bool term = !terminated.empty() && terminated[i] != 0;
    const bool ended = term || (!truncated.empty() && truncated[i] != 0);
    t.dones[i] = term ? 1 : 0;
    for (std::size_t k = 0; k < d; ++k)
      t.next_states[i * d + k] = ended && !final_observations.empty() ? final_observations[i * d + k]
                                                                      : next_observations[i * d + k];
  }
  return t;
}

void episode_tracker_step(Tracker& tr, std::span<const double> rewards,
                          std::span<const std::uint8_t> terminated,
                          std::span<const std::uint8_t> truncated) {
  for (std::size_t i = 0; i < rewards.size(); ++i) {
    tr.running[i] += rewards[i];
    const bool ended = (!terminated.empty() && terminated[i] != 0) ||
                       (!truncated.empty() && truncated[i] != 0);
    if (!ended) continue;
    tr.ring[tr.episodes % tr.ring.size()] = tr.running[i];
    tr.epoch_return_sum += tr.running[i];
    ++tr.episodes;
    ++tr.epoch_episodes;
    tr.running[i] = 0.0;
  }
  ++tr.vector_steps;
}

double recent_mean(const Tracker& tr) {
  const std::size_t count = std::min<std::uint64_t>(tr.episodes, tr.ring.size());
  if (count == 0) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0.0;
  for (std::size_t k = 0; k < count; ++k) sum += tr.ring[k];
  return sum / static_cast<double>(count);
}

}  // namespace resident::reference::dqn
