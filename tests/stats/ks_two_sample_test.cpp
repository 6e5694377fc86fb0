// Two-sample KS: the statistic (by hand and by brute force, ties included), the exact
// lattice-path p-value (against the Gnedenko-Korolyuk closed form and full enumeration), and
// the asymptotic p-value against the exact one.
#include "tests/stats/ks_two_sample.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/core/error.h"
#include "tests/stats/kolmogorov.h"

namespace {

using resident::stats::kolmogorov_survival;
using resident::stats::ks_two_sample;
using resident::stats::ks_two_sample_exact_p;

TEST(StatsKsTwoSample, StatisticByHand) {
  EXPECT_DOUBLE_EQ(
      ks_two_sample(std::vector<double>{1, 2, 3}, std::vector<double>{4, 5, 6}).statistic, 1.0);
  EXPECT_DOUBLE_EQ(
      ks_two_sample(std::vector<double>{1, 2, 3, 4}, std::vector<double>{2.5}).statistic, 0.5);
  // Ties: the CDFs are compared only after every copy of a value is counted.
  EXPECT_DOUBLE_EQ(ks_two_sample(std::vector<double>{1, 2}, std::vector<double>{2, 1}).statistic,
                   0.0);
  EXPECT_DOUBLE_EQ(
      ks_two_sample(std::vector<double>{1, 1, 2}, std::vector<double>{1, 2, 2}).statistic,
      1.0 / 3.0);
}

TEST(StatsKsTwoSample, PValueIsTheKolmogorovLimitAtSqrtNeTimesD) {
  const auto r = ks_two_sample(std::vector<double>{1, 2, 3, 4}, std::vector<double>{2.5, 9});
  EXPECT_DOUBLE_EQ(r.effective_n, 8.0 / 6.0);
  EXPECT_DOUBLE_EQ(r.p_value, kolmogorov_survival(std::sqrt(8.0 / 6.0) * r.statistic));
}

// Brute force: evaluate both empirical CDFs at every value present, by counting.
double brute_force_statistic(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> values(a);
  values.insert(values.end(), b.begin(), b.end());
  double best = 0.0;
  for (double v : values) {
    const double fa =
        static_cast<double>(std::count_if(a.begin(), a.end(), [v](double x) { return x <= v; })) /
        static_cast<double>(a.size());
    const double fb =
        static_cast<double>(std::count_if(b.begin(), b.end(), [v](double x) { return x <= v; })) /
        static_cast<double>(b.size());
    best = std::max(best, std::fabs(fa - fb));
  }
  return best;
}

TEST(StatsKsTwoSample, StatisticMatchesBruteForceWithTies) {
  std::mt19937_64 rng(20240501);
  double max_error = 0.0;
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = 1 + rng() % 40;
    const std::size_t m = 1 + rng() % 40;
    const unsigned levels = 2 + static_cast<unsigned>(rng() % 10);
    std::vector<double> a(n), b(m);
    for (double& x : a) x = static_cast<double>(rng() % levels);
    for (double& x : b) x = static_cast<double>(rng() % (levels + trial % 3));
    const double d = ks_two_sample(a, b).statistic;
    max_error = std::max(max_error, std::fabs(d - brute_force_statistic(a, b)));
  }
  std::printf("200 random tied samples: max |D - brute force| = %.2e (tolerance 1e-15)\n",
              max_error);
  EXPECT_LE(max_error, 1e-15);
}

// Gnedenko & Korolyuk (1951), exact for equal sizes:
//   P(D_{n,n} >= k/n) = 2 sum_{j=1}^{floor(n/k)} (-1)^(j+1) C(2n, n - jk) / C(2n, n).
long double gnedenko_korolyuk(int n, int k) {
  // C(2n, n - jk) / C(2n, n) = prod_{i=0}^{jk-1} (n - i) / (n + 1 + i)
  long double sum = 0.0L;
  for (int j = 1; j * k <= n; ++j) {
    long double ratio = 1.0L;
    for (int i = 0; i < j * k; ++i) ratio *= static_cast<long double>(n - i) / (n + 1 + i);
    sum += (j % 2 ? 1.0L : -1.0L) * ratio;
  }
  return 2.0L * sum;
}

TEST(StatsKsTwoSample, ExactPMatchesGnedenkoKorolyuk) {
  for (int n : {1, 10, 50, 200}) {
    double max_relative = 0.0;
    for (int k = 1; k <= n; ++k) {
      const double reference = static_cast<double>(gnedenko_korolyuk(n, k));
      if (reference < 1e-12) continue;
      const double p = ks_two_sample_exact_p(n, n, static_cast<double>(k) / n);
      max_relative = std::max(max_relative, std::fabs(p - reference) / reference);
    }
    std::printf(
        "n = m = %d: max relative |exact DP - Gnedenko-Korolyuk| = %.2e (tolerance "
        "1e-9)\n",
        n, max_relative);
    EXPECT_LE(max_relative, 1e-9) << "n = " << n;
  }
}

// Every one of the C(12, 5) = 792 equally likely arrangements of a (size 5) among b (size 7).
TEST(StatsKsTwoSample, ExactPMatchesFullEnumerationForUnequalSizes) {
  const int n = 5;
  const int m = 7;
  std::vector<int> gaps;  // |i m - j n| maximum of each path, in units of 1/(n m)
  for (unsigned mask = 0; mask < (1u << (n + m)); ++mask) {
    if (std::popcount(mask) != n) continue;
    int i = 0, j = 0, worst = 0;
    for (int step = 0; step < n + m; ++step) {
      (mask >> step & 1u) ? ++i : ++j;
      worst = std::max(worst, std::abs(i * m - j * n));
    }
    gaps.push_back(worst);
  }
  ASSERT_EQ(gaps.size(), 792u);
  double max_error = 0.0;
  for (int threshold = 1; threshold <= n * m; ++threshold) {
    const double counted = static_cast<double>(std::count_if(
                               gaps.begin(), gaps.end(), [&](int g) { return g >= threshold; })) /
                           792.0;
    const double p = ks_two_sample_exact_p(n, m, static_cast<double>(threshold) / (n * m));
    max_error = std::max(max_error, std::fabs(p - counted));
  }
  std::printf("n = 5, m = 7: max |exact DP - enumeration| = %.2e (tolerance 1e-13)\n", max_error);
  EXPECT_LE(max_error, 1e-13);
}

// The asymptotic p-value against the exact one where the samplers' tests use it (hundreds to
// thousands of draws), for exact p in [1e-3, 0.3]: never below it by more than 1% relative
// (the test stays valid at its level) and at most 20% above (it keeps its power). Stephens'
// one-sample correction is printed for comparison; it is not what ks_two_sample uses.
TEST(StatsKsTwoSample, AsymptoticPValueIsConservativeAndClose) {
  struct Sizes {
    std::size_t n, m;
  };
  for (const Sizes s : {Sizes{1000, 1000}, Sizes{400, 1000}, Sizes{1500, 2000}, Sizes{300, 310}}) {
    const double ne = static_cast<double>(s.n * s.m) / static_cast<double>(s.n + s.m);
    const double en = std::sqrt(ne);
    double low = INFINITY, high = -INFINITY, low_stephens = INFINITY, high_stephens = -INFINITY;
    int compared = 0;
    // D takes the values g / lcm(n, m); scan those in the 0.3 .. 0.001 tail.
    const double step = 1.0 / static_cast<double>(std::lcm(s.n, s.m));
    for (double d = 1.0 / en; d < 2.0 / en; d += 0.02 / en) {
      const double lattice_d = std::ceil(d / step) * step;
      const double exact = ks_two_sample_exact_p(s.n, s.m, lattice_d);
      if (exact < 1e-3 || exact > 0.3) continue;
      const double relative = (kolmogorov_survival(en * lattice_d) - exact) / exact;
      const double relative_stephens =
          (kolmogorov_survival((en + 0.12 + 0.11 / en) * lattice_d) - exact) / exact;
      low = std::min(low, relative);
      high = std::max(high, relative);
      low_stephens = std::min(low_stephens, relative_stephens);
      high_stephens = std::max(high_stephens, relative_stephens);
      ++compared;
    }
    std::printf(
        "n = %zu, m = %zu: %d D values, (asymptotic - exact) / exact in [%.3f, %.3f] "
        "(allowed [-0.01, 0.20]); with Stephens' correction [%.3f, %.3f]\n",
        s.n, s.m, compared, low, high, low_stephens, high_stephens);
    EXPECT_GT(compared, 10);
    EXPECT_GE(low, -0.01);
    EXPECT_LE(high, 0.20);
  }
}

// Under the null (two uniform samples) the p-value is uniform: the share of 4000 seeded
// replications with p < 0.05 lies within 4 binomial standard deviations of 0.05.
TEST(StatsKsTwoSample, RejectsAtTheNominalRateUnderTheNull) {
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const int replications = 4000;
  int rejected = 0;
  std::vector<double> a(300), b(500);
  for (int r = 0; r < replications; ++r) {
    for (double& x : a) x = uniform(rng);
    for (double& x : b) x = uniform(rng);
    if (ks_two_sample(a, b).p_value < 0.05) ++rejected;
  }
  const double rate = static_cast<double>(rejected) / replications;
  const double sd = std::sqrt(0.05 * 0.95 / replications);
  std::printf("rejection rate at 0.05 under the null: %.4f (allowed 0.05 +- %.4f)\n", rate, 4 * sd);
  EXPECT_NEAR(rate, 0.05, 4 * sd);
}

TEST(StatsKsTwoSample, RejectsEmptyAndNaN) {
  EXPECT_THROW(ks_two_sample(std::vector<double>{}, std::vector<double>{1}), resident::Error);
  EXPECT_THROW(ks_two_sample(std::vector<double>{NAN}, std::vector<double>{1}), resident::Error);
  EXPECT_THROW(ks_two_sample_exact_p(0, 3, 0.5), resident::Error);
}

}  // namespace
