// The PPO loss reference against central finite differences in double: its gradients with
// respect to the log-probs, entropies and values, and through the categorical head to the
// logits; plus the sampler's inverse CDF and the permutation reference on small cases worked by
// hand.
#include "tests/reference/ppo_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "tests/reference/finite_difference.h"
#include "tests/reference/nn_reference.h"
#include "tests/support/param_name.h"

namespace {

using namespace resident::reference;

struct Batch {
  std::size_t rows = 0, cols = 0;
  std::vector<double> logits, old_log_prob, advantages, returns, old_values, values;
  std::vector<std::int32_t> actions;
};

// Ratios spread over roughly [0.6, 1.6] so both clip branches appear; values near the old ones
// so both value branches appear.
Batch random_batch(std::size_t rows, std::size_t cols, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  Batch b{rows, cols};
  for (std::size_t i = 0; i < rows * cols; ++i) b.logits.push_back(1.5 * unit(rng));
  for (std::size_t r = 0; r < rows; ++r) b.actions.push_back(static_cast<std::int32_t>(rng() % cols));
  const std::vector<double> lp = categorical_log_prob(rows, cols, b.logits, b.actions);
  for (std::size_t r = 0; r < rows; ++r) {
    b.old_log_prob.push_back(lp[r] + 0.45 * unit(rng));
    b.advantages.push_back(2.0 * unit(rng));
    b.returns.push_back(3.0 * unit(rng));
    b.old_values.push_back(3.0 * unit(rng));
    b.values.push_back(b.old_values[r] + 0.4 * unit(rng));
  }
  return b;
}

PpoLossResult loss_from_logits(const Batch& b, std::span<const double> logits,
                               std::span<const double> values, const PpoLossCoefficients& k) {
  const std::vector<double> lp = categorical_log_prob(b.rows, b.cols, logits, b.actions);
  const std::vector<double> entropy = categorical_entropy(b.rows, b.cols, logits);
  return ppo_loss({lp, entropy, values, b.old_log_prob, b.advantages, b.returns, b.old_values}, k);
}

class PpoLossReference : public ::testing::TestWithParam<bool> {};

TEST_P(PpoLossReference, GradientsMatchFiniteDifferences) {
  const PpoLossCoefficients k{0.2, GetParam(), 0.01, 0.5};
  const Batch b = random_batch(40, 3, GetParam() ? 11 : 12);
  const PpoLossResult base = loss_from_logits(b, b.logits, b.values, k);
  EXPECT_GT(base.clip_fraction, 0.05) << "the batch should exercise the clipped branch";
  EXPECT_LT(base.clip_fraction, 0.95);

  // d total / d logits through the categorical head.
  std::vector<double> d_logits(b.logits.size(), 0.0);
  categorical_log_prob_backward(b.rows, b.cols, b.logits, b.actions, base.d_log_prob, d_logits,
                                GradMode::Overwrite);
  categorical_entropy_backward(b.rows, b.cols, b.logits, base.d_entropy, d_logits,
                               GradMode::Accumulate);
  const GradientComparison logits_check = check_gradient(
      [&](std::span<const double> x) { return loss_from_logits(b, x, b.values, k).total; },
      b.logits, d_logits);
  std::printf("  d/dlogits: max rel error %.3g (at %zu)\n", logits_check.max_rel_error,
              logits_check.worst_index);
  EXPECT_LT(logits_check.max_rel_error, 1e-5);

  const GradientComparison value_check = check_gradient(
      [&](std::span<const double> v) { return loss_from_logits(b, b.logits, v, k).total; },
      b.values, base.d_value);
  std::printf("  d/dvalues: max rel error %.3g (at %zu)\n", value_check.max_rel_error,
              value_check.worst_index);
  EXPECT_LT(value_check.max_rel_error, 1e-5);

  // Directly in the log-probs and entropies.
  const std::vector<double> lp = categorical_log_prob(b.rows, b.cols, b.logits, b.actions);
  const std::vector<double> entropy = categorical_entropy(b.rows, b.cols, b.logits);
  const GradientComparison lp_check = check_gradient(
      [&](std::span<const double> x) {
        return ppo_loss({x, entropy, b.values, b.old_log_prob, b.advantages, b.returns,
                         b.old_values},
                        k)
            .total;
      },
      lp, base.d_log_prob);
  EXPECT_LT(lp_check.max_rel_error, 1e-5);
  const GradientComparison entropy_check = check_gradient(
      [&](std::span<const double> x) {
        return ppo_loss({lp, x, b.values, b.old_log_prob, b.advantages, b.returns, b.old_values}, k)
            .total;
      },
      entropy, base.d_entropy);
  EXPECT_LT(entropy_check.max_rel_error, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(ValueClipping, PpoLossReference, ::testing::Bool(),
                         [](const auto& test_case) {
                           return resident::test::flag(test_case.param, "clipped", "unclipped");
                         });

// One row by hand: A = 2, r = e^0.5 = 1.6487 > 1.2: -A r = -3.297 < -A 1.2 = -2.4, so the clipped
// branch wins (policy 2.4... as a loss: max(-3.297, -2.4) = -2.4) and d/dlp = 0.
TEST(PpoLossReferenceByHand, ClippedRowHasNoPolicyGradient) {
  const std::vector<double> lp{0.0}, entropy{0.5}, v{1.0}, old_lp{-0.5}, adv{2.0}, ret{0.0},
      old_v{1.0};
  const PpoLossResult r = ppo_loss({lp, entropy, v, old_lp, adv, ret, old_v}, {0.2, true, 0.01, 0.5});
  EXPECT_NEAR(r.policy_loss, -2.4, 1e-12);
  EXPECT_EQ(r.d_log_prob[0], 0.0);
  EXPECT_NEAR(r.value_loss, 0.5, 1e-12);
  EXPECT_NEAR(r.d_value[0], 0.5, 1e-12);
  EXPECT_EQ(r.clip_fraction, 1.0);
  // A negative advantage with r above the range: -A r = 3.297 > -A 1.2 = 2.4: unclipped wins.
  const std::vector<double> neg{-2.0};
  const PpoLossResult n = ppo_loss({lp, entropy, v, old_lp, neg, ret, old_v}, {0.2, true, 0.01, 0.5});
  EXPECT_NEAR(n.policy_loss, 2.0 * std::exp(0.5), 1e-12);
  EXPECT_NEAR(n.d_log_prob[0], 2.0 * std::exp(0.5), 1e-12);
}

TEST(PpoSampleCategoricalReference, InverseCdf) {
  const std::vector<double> logits{0.0, std::log(3.0)};  // p = 0.25, 0.75
  EXPECT_EQ(sample_categorical(logits, 0.0), 0);
  EXPECT_EQ(sample_categorical(logits, 0.2499), 0);
  EXPECT_EQ(sample_categorical(logits, 0.2501), 1);
  EXPECT_EQ(sample_categorical(logits, 0.9999999), 1);
  const std::vector<double> masked{0.0, -INFINITY, 0.0};
  EXPECT_EQ(sample_categorical(masked, 0.5), 2);
}

TEST(PpoPermutationReference, IsAPermutationAndDependsOnTheDraw) {
  const auto a = random_permutation(1000, 42, 0), b = random_permutation(1000, 42, 1);
  std::vector<int> seen(1000, 0);
  for (std::uint32_t i : a) ++seen.at(i);
  for (int s : seen) ASSERT_EQ(s, 1);
  EXPECT_NE(a, b);
}

}  // namespace
