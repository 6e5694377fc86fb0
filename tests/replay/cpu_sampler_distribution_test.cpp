// The CPU sampler draws the exact P(i): chi-square goodness of fit of pooled samples against
// P(i) computed here in long double from the TD errors (proportional and rank-based, stratified
// and independent), and a two-sample KS test of the sampled priorities against a plain
// reference sampler. Each test has negative controls -- small deliberately broken samplers
// defined below (wrong alpha, an off-by-one leaf, truncated strata) -- that the same test must
// reject. Seeds are pinned; the level is 0.01 (DESIGN.md, "Statistical tests of the sampler").
// Stratified draws are negatively correlated within a batch, so their pooled counts vary less
// than multinomial counts and the chi-square test is conservative for them (p near 1 is
// expected); the marginal distribution of each pooled draw is still exactly P(i).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "lib/replay/cpu_replay_buffer.h"
#include "lib/replay/unit_uniform.h"
#include "tests/stats/chi_square.h"
#include "tests/stats/ks_two_sample.h"

namespace {

using resident::CpuReplayBuffer;
using resident::ReplayConfig;
using resident::ReplayPriorityMode;
using resident::ReplaySampling;
using resident::SampledBatch;
using resident::unit_uniform;
using resident::stats::chi_square_goodness_of_fit;
using resident::stats::ks_two_sample;

constexpr double kLevel = 0.01;
constexpr std::size_t kCapacity = 1000;  // not a power of two
constexpr std::size_t kBatch = 64;
constexpr std::size_t kCalls = 2000;  // 128,000 pooled draws
constexpr double kAlpha = 0.6;
constexpr double kWrongAlpha = 0.5;
constexpr double kEpsilon = 1e-3;

// TD errors with magnitudes log-uniform over [1e-3, 10] and random signs; every 100th slot
// (7, 107, ...) gets priority 0 instead.
std::vector<float> make_td_errors() {
  std::mt19937_64 rng(20250105);
  std::uniform_real_distribution<double> exponent(-3.0, 1.0);
  std::vector<float> td(kCapacity);
  for (float& v : td)
    v = static_cast<float>(std::pow(10.0, exponent(rng)) * ((rng() & 1) ? 1.0 : -1.0));
  return td;
}
bool is_zero_slot(std::size_t slot) { return slot % 100 == 7; }

// Stored priorities, in long double, for a given alpha.
std::vector<long double> priorities(const std::vector<float>& td, double alpha) {
  std::vector<long double> p(td.size());
  for (std::size_t i = 0; i < td.size(); ++i)
    p[i] = is_zero_slot(i) ? 0.0L
                           : std::pow(std::fabs(static_cast<long double>(td[i])) + kEpsilon,
                                      static_cast<long double>(alpha));
  return p;
}

// Sampling weights (unnormalized P) for a mode and alpha: p_i, or rank(i)^-alpha over the
// positive priorities (rank 1 = largest; ties by lower slot).
std::vector<long double> sampling_weights(const std::vector<float>& td, ReplayPriorityMode mode,
                                          double alpha) {
  std::vector<long double> p = priorities(td, alpha);
  if (mode == ReplayPriorityMode::Proportional) return p;
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] > 0.0L) order.push_back(i);
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  std::vector<long double> w(p.size(), 0.0L);
  for (std::size_t r = 1; r <= order.size(); ++r)
    w[order[r - 1]] = std::pow(static_cast<long double>(r), -static_cast<long double>(alpha));
  return w;
}

std::vector<double> normalized(const std::vector<long double>& w) {
  const long double total = std::accumulate(w.begin(), w.end(), 0.0L);
  std::vector<double> p(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) p[i] = static_cast<double>(w[i] / total);
  return p;
}

CpuReplayBuffer make_buffer(const std::vector<float>& td, ReplayPriorityMode mode,
                            ReplaySampling sampling) {
  ReplayConfig config;
  config.capacity = kCapacity;
  config.state_dim = 1;
  config.alpha = kAlpha;
  config.epsilon = kEpsilon;
  config.mode = mode;
  config.sampling = sampling;
  CpuReplayBuffer buffer(config);
  const std::vector<float> zeros(kCapacity, 0.0f);
  const std::vector<std::int32_t> actions(kCapacity, 0);
  const std::vector<std::uint8_t> dones(kCapacity, 0);
  buffer.insert_batch({zeros, actions, zeros, zeros, dones});
  std::vector<std::uint32_t> indices(kCapacity), generations(kCapacity);
  for (std::uint32_t s = 0; s < kCapacity; ++s) {
    indices[s] = s;
    generations[s] = buffer.generation(s);
  }
  buffer.update_priorities(indices, generations, td);
  std::vector<std::uint32_t> zero_slots, zero_generations;
  for (std::uint32_t s = 0; s < kCapacity; ++s)
    if (is_zero_slot(s)) {
      zero_slots.push_back(s);
      zero_generations.push_back(buffer.generation(s));
    }
  buffer.assign_priorities(zero_slots, zero_generations,
                           std::vector<double>(zero_slots.size(), 0.0));
  return buffer;
}

// The slots of kCalls batches of kBatch from the buffer.
std::vector<std::uint32_t> buffer_draws(CpuReplayBuffer& buffer, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  SampledBatch out;
  std::vector<std::uint32_t> draws;
  draws.reserve(kBatch * kCalls);
  for (std::size_t call = 0; call < kCalls; ++call) {
    buffer.sample(kBatch, rng, out);
    draws.insert(draws.end(), out.indices.begin(), out.indices.end());
  }
  return draws;
}

// A plain stratified sampler over the cumulative weights -- first i with c_i > mass, as the
// buffer documents -- with one planted defect, or none.
enum class Defect {
  None,
  OffByOneLeaf,     // returns the slot after the one whose interval holds the mass
  TruncatedStrata,  // each draw covers only the first 95% of its stratum
};

std::vector<std::uint32_t> reference_draws(const std::vector<long double>& weights, Defect defect,
                                           std::uint64_t seed) {
  std::vector<double> cumulative(weights.size());
  long double running = 0.0L;
  for (std::size_t i = 0; i < weights.size(); ++i)
    cumulative[i] = static_cast<double>(running += weights[i]);
  const double total = cumulative.back();
  std::mt19937_64 rng(seed);
  std::vector<std::uint32_t> draws;
  draws.reserve(kBatch * kCalls);
  for (std::size_t call = 0; call < kCalls; ++call) {
    for (std::size_t k = 0; k < kBatch; ++k) {
      double u = unit_uniform(rng);
      if (defect == Defect::TruncatedStrata) u *= 0.95;
      const double mass = (static_cast<double>(k) + u) * total / static_cast<double>(kBatch);
      std::size_t slot = static_cast<std::size_t>(
          std::upper_bound(cumulative.begin(), cumulative.end(), mass) - cumulative.begin());
      slot = std::min(slot, weights.size() - 1);
      if (defect == Defect::OffByOneLeaf) slot = (slot + 1) % weights.size();
      draws.push_back(static_cast<std::uint32_t>(slot));
    }
  }
  return draws;
}

resident::stats::ChiSquareResult chi_square(const std::vector<std::uint32_t>& draws,
                                            const std::vector<double>& probability,
                                            const std::string& label) {
  std::vector<std::uint64_t> counts(probability.size(), 0);
  for (std::uint32_t slot : draws) ++counts[slot];
  std::vector<double> expected(probability.size());
  for (std::size_t i = 0; i < probability.size(); ++i)
    expected[i] = probability[i] * static_cast<double>(draws.size());
  const auto result = chi_square_goodness_of_fit(counts, expected);
  std::printf("  %-44s chi2 = %10.1f  dof = %4zu  p = %.3g\n", label.c_str(), result.statistic,
              result.dof, result.p_value);
  return result;
}

const char* mode_name(ReplayPriorityMode mode) {
  return mode == ReplayPriorityMode::Rank ? "rank" : "proportional";
}

class CpuSamplerDistribution : public ::testing::TestWithParam<ReplayPriorityMode> {};

TEST_P(CpuSamplerDistribution, ChiSquareAcceptsTheBufferAndRejectsBrokenSamplers) {
  const ReplayPriorityMode mode = GetParam();
  const std::vector<float> td = make_td_errors();
  const std::vector<long double> weights = sampling_weights(td, mode, kAlpha);
  const std::vector<double> probability = normalized(weights);
  std::printf("%s, %zu slots, %zu x %zu draws, level %.2f\n", mode_name(mode), kCapacity, kCalls,
              kBatch, kLevel);

  double max_error = 0.0;
  for (ReplaySampling sampling : {ReplaySampling::Stratified, ReplaySampling::Independent}) {
    CpuReplayBuffer buffer = make_buffer(td, mode, sampling);
    for (std::size_t i = 0; i < kCapacity; ++i) {
      const double error = std::fabs(buffer.probability(i) - probability[i]);
      max_error = std::max(max_error, probability[i] > 0 ? error / probability[i] : error);
    }
    const bool stratified = sampling == ReplaySampling::Stratified;
    const auto result =
        chi_square(buffer_draws(buffer, stratified ? 101 : 102), probability,
                   std::string("CpuReplayBuffer, ") + (stratified ? "stratified" : "independent"));
    EXPECT_GT(result.p_value, kLevel);
  }
  std::printf("  max relative error of probability(i) vs long double: %.2e (tolerance 1e-12)\n",
              max_error);
  EXPECT_LE(max_error, 1e-12);

  // The reference sampler without a defect passes, so the rejections below are the defects'.
  EXPECT_GT(chi_square(reference_draws(weights, Defect::None, 103), probability,
                       "reference sampler, no defect")
                .p_value,
            kLevel);
  // Negative controls: the same test must reject each.
  EXPECT_LT(chi_square(reference_draws(sampling_weights(td, mode, kWrongAlpha), Defect::None, 104),
                       probability, "control: wrong alpha (0.5 for 0.6)")
                .p_value,
            kLevel);
  EXPECT_LT(chi_square(reference_draws(weights, Defect::OffByOneLeaf, 105), probability,
                       "control: off-by-one leaf")
                .p_value,
            kLevel);
  EXPECT_LT(chi_square(reference_draws(weights, Defect::TruncatedStrata, 106), probability,
                       "control: strata truncated to 95%")
                .p_value,
            kLevel);
}

// KS on the stored priority of each drawn slot (an ordered quantity that every defect moves),
// buffer against the reference sampler from the same priorities, as the GPU test compares
// GPU against CPU.
TEST_P(CpuSamplerDistribution, KsOfSampledPrioritiesAcceptsTheBufferAndRejectsBrokenSamplers) {
  const ReplayPriorityMode mode = GetParam();
  const std::vector<float> td = make_td_errors();
  const std::vector<long double> weights = sampling_weights(td, mode, kAlpha);
  const std::vector<long double> stored = priorities(td, kAlpha);
  const auto sampled_priorities = [&](const std::vector<std::uint32_t>& draws) {
    std::vector<double> values(draws.size());
    for (std::size_t k = 0; k < draws.size(); ++k)
      values[k] = static_cast<double>(stored[draws[k]]);
    return values;
  };
  CpuReplayBuffer buffer = make_buffer(td, mode, ReplaySampling::Stratified);
  const std::vector<double> from_buffer = sampled_priorities(buffer_draws(buffer, 201));
  std::printf("%s: KS of sampled priorities, %zu draws each\n", mode_name(mode),
              from_buffer.size());
  const auto ks = [&](const std::vector<std::uint32_t>& draws, const char* label) {
    const auto result = ks_two_sample(from_buffer, sampled_priorities(draws));
    std::printf("  buffer vs %-36s D = %.5f  p = %.3g\n", label, result.statistic, result.p_value);
    return result.p_value;
  };
  EXPECT_GT(ks(reference_draws(weights, Defect::None, 202), "reference sampler, no defect"),
            kLevel);
  EXPECT_LT(ks(reference_draws(sampling_weights(td, mode, kWrongAlpha), Defect::None, 203),
               "control: wrong alpha (0.5 for 0.6)"),
            kLevel);
  EXPECT_LT(ks(reference_draws(weights, Defect::OffByOneLeaf, 204), "control: off-by-one leaf"),
            kLevel);
}

INSTANTIATE_TEST_SUITE_P(Modes, CpuSamplerDistribution,
                         ::testing::Values(ReplayPriorityMode::Proportional,
                                           ReplayPriorityMode::Rank),
                         [](const auto& test) { return std::string(mode_name(test.param)); });

}  // namespace
