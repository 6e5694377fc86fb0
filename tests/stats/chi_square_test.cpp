// Chi-square goodness of fit: a published example, the merging of bins expecting < 5, and
// the rejection rate under the null.
#include "tests/stats/chi_square.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/core/error.h"

namespace {

using resident::stats::chi_square_goodness_of_fit;
using resident::stats::chi_square_survival;

// Mendel's dihybrid cross (round-yellow, wrinkled-yellow, round-green, wrinkled-green) against
// the 9:3:3:1 ratio: chi-square = 0.470 on 3 degrees of freedom, p = 0.925 (the textbook
// example; e.g. Fisher 1936, "Has Mendel's work been rediscovered?"). Published to 3 decimals;
// tolerance 5e-4. The statistic is also checked against the sum written out here (1e-12).
TEST(StatsChiSquare, MendelPeas) {
  const std::vector<std::uint64_t> observed = {315, 108, 101, 32};
  const std::vector<double> expected = {556.0 * 9 / 16, 556.0 * 3 / 16, 556.0 * 3 / 16,
                                        556.0 * 1 / 16};
  const auto r = chi_square_goodness_of_fit(observed, expected);
  const double by_hand =
      2.25 * 2.25 / 312.75 + 3.75 * 3.75 / 104.25 + 3.25 * 3.25 / 104.25 + 2.75 * 2.75 / 34.75;
  std::printf(
      "Mendel: statistic %.6f (hand %.6f, published 0.470), dof %zu, p %.6f "
      "(published 0.925)\n",
      r.statistic, by_hand, r.dof, r.p_value);
  EXPECT_NEAR(r.statistic, by_hand, 1e-12);
  EXPECT_NEAR(r.statistic, 0.470, 5e-4);
  EXPECT_EQ(r.dof, 3u);
  EXPECT_EQ(r.bins, 4u);
  EXPECT_NEAR(r.p_value, 0.925, 5e-4);
}

TEST(StatsChiSquare, MergesConsecutiveBinsExpectingFewerThanFive) {
  // expected 2,2,2 | 10 | 1,1,3  ->  merged expected 6, 10, 5
  const std::vector<double> expected = {2, 2, 2, 10, 1, 1, 3};
  const std::vector<std::uint64_t> observed = {1, 4, 0, 12, 0, 3, 3};
  const auto r = chi_square_goodness_of_fit(observed, expected);
  const double by_hand =
      (5.0 - 6) * (5.0 - 6) / 6 + (12.0 - 10) * (12.0 - 10) / 10 + (6.0 - 5) * (6.0 - 5) / 5;
  EXPECT_EQ(r.bins, 3u);
  EXPECT_EQ(r.dof, 2u);
  EXPECT_NEAR(r.statistic, by_hand, 1e-12);
  EXPECT_NEAR(r.p_value, chi_square_survival(by_hand, 2.0), 1e-15);
  EXPECT_NEAR(r.p_value, std::exp(-by_hand / 2), 1e-14);  // chi-square(2) tail is e^(-x/2)
}

TEST(StatsChiSquare, RemainderJoinsTheLastBin) {
  // expected 10 | 10, then a remainder of 3 + 0 joins the second bin: merged 10, 13.
  const std::vector<double> expected = {10, 10, 3, 0};
  const std::vector<std::uint64_t> observed = {7, 11, 2, 3};  // 3 draws where none expected
  const auto r = chi_square_goodness_of_fit(observed, expected);
  EXPECT_EQ(r.bins, 2u);
  EXPECT_NEAR(r.statistic, 9.0 / 10 + 9.0 / 13, 1e-12);
}

TEST(StatsChiSquare, EstimatedParametersReduceTheDegreesOfFreedom) {
  const std::vector<double> expected = {10, 10, 10, 10};
  const std::vector<std::uint64_t> observed = {12, 8, 9, 11};
  EXPECT_EQ(chi_square_goodness_of_fit(observed, expected, 1).dof, 2u);
}

TEST(StatsChiSquare, RejectsBadInput) {
  EXPECT_THROW(
      chi_square_goodness_of_fit(std::vector<std::uint64_t>{1, 2}, std::vector<double>{5, 5, 5}),
      resident::Error);
  EXPECT_THROW(
      chi_square_goodness_of_fit(std::vector<std::uint64_t>{1, 2}, std::vector<double>{-1, 5}),
      resident::Error);
  EXPECT_THROW(
      chi_square_goodness_of_fit(std::vector<std::uint64_t>{1, 2}, std::vector<double>{NAN, 5}),
      resident::Error);
  // 4 expected in all: one merged bin, no degree of freedom.
  EXPECT_THROW(
      chi_square_goodness_of_fit(std::vector<std::uint64_t>{1, 2}, std::vector<double>{2, 2}),
      resident::Error);
}

// Multinomial samples from the expected distribution (many bins expecting < 5, so merging is
// exercised): over 2000 seeded replications the share with p < 0.05 lies within 4 binomial
// standard deviations of 0.05.
TEST(StatsChiSquare, RejectsAtTheNominalRateUnderTheNull) {
  const int bins = 60;
  const int draws = 400;
  std::vector<double> weights(bins);
  double total = 0.0;
  for (int i = 0; i < bins; ++i) total += weights[i] = 1.0 / (1.0 + i * 0.3);
  std::vector<double> expected(bins);
  for (int i = 0; i < bins; ++i) expected[i] = draws * weights[i] / total;
  std::mt19937_64 rng(4242);
  std::discrete_distribution<int> pick(weights.begin(), weights.end());
  const int replications = 2000;
  int rejected = 0;
  std::size_t merged_bins = 0;
  std::vector<std::uint64_t> observed(bins);
  for (int r = 0; r < replications; ++r) {
    std::fill(observed.begin(), observed.end(), 0);
    for (int d = 0; d < draws; ++d) ++observed[pick(rng)];
    const auto result = chi_square_goodness_of_fit(observed, expected);
    merged_bins = result.bins;
    if (result.p_value < 0.05) ++rejected;
  }
  const double rate = static_cast<double>(rejected) / replications;
  const double sd = std::sqrt(0.05 * 0.95 / replications);
  std::printf(
      "%d bins merged to %zu; rejection rate at 0.05 under the null: %.4f (allowed "
      "0.05 +- %.4f)\n",
      bins, merged_bins, rate, 4 * sd);
  EXPECT_LT(merged_bins, static_cast<std::size_t>(bins));
  EXPECT_NEAR(rate, 0.05, 4 * sd);
}

}  // namespace
