#include "tests/reference/ppo_reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "tests/reference/philox_reference.h"

namespace resident::reference {

PpoLossResult ppo_loss(const PpoLossBatch& b, const PpoLossCoefficients& k) {
  const std::size_t n = b.log_prob.size();
  if (n == 0 || b.entropy.size() != n || b.values.size() != n || b.old_log_prob.size() != n ||
      b.advantages.size() != n || b.returns.size() != n || b.old_values.size() != n)
    throw std::invalid_argument("ppo_loss: every array has the same size B >= 1");
  PpoLossResult out;
  out.d_log_prob.assign(n, 0.0);
  out.d_entropy.assign(n, -k.entropy / static_cast<double>(n));
  out.d_value.assign(n, 0.0);
  const double inv = 1.0 / static_cast<double>(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double log_ratio = b.log_prob[i] - b.old_log_prob[i];
    const double r = std::exp(log_ratio);
    const double a = b.advantages[i];
    const double unclipped = -a * r;
    const double clipped = -a * std::clamp(r, 1.0 - k.clip, 1.0 + k.clip);
    const bool unclipped_wins = unclipped >= clipped;
    out.policy_loss += (unclipped_wins ? unclipped : clipped) * inv;
    out.d_log_prob[i] = (unclipped_wins ? -a * r : 0.0) * inv;

    const double e = b.values[i] - b.returns[i];
    double value_term = e * e, d = e;
    if (k.clip_value_loss) {
      const double change = b.values[i] - b.old_values[i];
      const double ec = b.old_values[i] + std::clamp(change, -k.clip, k.clip) - b.returns[i];
      if (ec * ec > value_term) {
        value_term = ec * ec;
        d = std::fabs(change) <= k.clip ? ec : 0.0;
      }
    }
    out.value_loss += 0.5 * value_term * inv;
    out.d_value[i] = k.value * d * inv;
    out.entropy += b.entropy[i] * inv;
    out.approx_kl += ((r - 1.0) - log_ratio) * inv;
    out.clip_fraction += (std::fabs(r - 1.0) > k.clip ? 1.0 : 0.0) * inv;
  }
  out.total = out.policy_loss - k.entropy * out.entropy + k.value * out.value_loss;
  return out;
}

std::int32_t sample_categorical(std::span<const double> logits, double u) {
  if (logits.empty()) throw std::invalid_argument("sample_categorical: no logits");
  const double m = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (double x : logits) sum += std::exp(x - m);
  const double target = u * sum;
  double cumulative = 0.0;
  std::int32_t last_positive = 0;
  for (std::size_t c = 0; c < logits.size(); ++c) {
    const double e = std::exp(logits[c] - m);
    if (e > 0.0) last_positive = static_cast<std::int32_t>(c);
    cumulative += e;
    if (target < cumulative) return static_cast<std::int32_t>(c);
  }
  return last_positive;
}

std::vector<std::uint32_t> random_permutation(std::size_t n, std::uint64_t philox_seed,
                                              std::uint64_t draw) {
  std::vector<std::uint32_t> keys(n), order(n);
  for (std::size_t i = 0; i < n; ++i) keys[i] = curand_philox_draw(philox_seed, i, 4 * draw, 0);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return keys[a] < keys[b]; });
  return order;
}

}  // namespace resident::reference
