// kolmogorov_survival against published quantiles of the Kolmogorov distribution and
// against itself across the switch between its two series.
#include "tests/stats/kolmogorov.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

namespace {

using resident::stats::kolmogorov_survival;

// Quantiles x_q with K(x_q) = q (Smirnov 1948, "Table for estimating the goodness of fit of
// empirical distributions", Ann. Math. Statist. 19(2); the same values as the asymptotic
// critical values of KS tables, e.g. 1.3581 at the 5% level). The table gives x to 5
// significant digits, which moves Q by at most |K'(x)| * 5e-6 < 1e-5; tolerance 1e-5 absolute.
TEST(StatsKolmogorov, MatchesPublishedQuantiles) {
  struct Row {
    double x;
    double survival;
  };
  const Row rows[] = {
      {1.07275, 0.20}, {1.22385, 0.10}, {1.35810, 0.05}, {1.62762, 0.01}, {1.94947, 0.001}};
  for (const Row& row : rows) {
    const double q = kolmogorov_survival(row.x);
    std::printf("Q_K(%.5f) = %.8f, table %.3f, error %.2e (tolerance 1e-5)\n", row.x, q,
                row.survival, q - row.survival);
    EXPECT_NEAR(q, row.survival, 1e-5) << "x = " << row.x;
  }
}

// Values of the CDF K(x) from the same kind of table (Smirnov 1948; also e.g. Marsaglia,
// Tsang & Wang 2003): K(0.5) = 0.036055, K(1.0) = 0.730000, K(1.5) = 0.977782,
// K(2.0) = 0.999329, given to 6 decimals; tolerance 1e-6. x = 0.5 exercises the small-x series.
TEST(StatsKolmogorov, MatchesPublishedCdfValues) {
  struct Row {
    double x;
    double cdf;
  };
  const Row rows[] = {{0.5, 0.036055}, {1.0, 0.730000}, {1.5, 0.977782}, {2.0, 0.999329}};
  for (const Row& row : rows) {
    const double cdf = 1.0 - kolmogorov_survival(row.x);
    std::printf("K(%.1f) = %.8f, table %.6f, error %.2e (tolerance 1e-6)\n", row.x, cdf, row.cdf,
                cdf - row.cdf);
    EXPECT_NEAR(cdf, row.cdf, 1e-6) << "x = " << row.x;
  }
}

// Both series describe one function: on a grid straddling the switch at 1.18 each series,
// evaluated by hand here, agrees with the other to 1e-14.
TEST(StatsKolmogorov, SeriesAgreeAcrossTheSwitch) {
  const double pi = 3.14159265358979323846;
  double max_diff = 0.0;
  for (double x = 0.9; x <= 1.5; x += 0.01) {
    double alternating = 0.0;
    for (int k = 1; k <= 60; ++k)
      alternating += 2.0 * ((k % 2) ? 1.0 : -1.0) * std::exp(-2.0 * k * k * x * x);
    double jacobi = 0.0;
    for (int k = 1; k <= 60; ++k)
      jacobi += std::exp(-(2.0 * k - 1) * (2.0 * k - 1) * pi * pi / (8.0 * x * x));
    const double small_x_form = 1.0 - std::sqrt(2.0 * pi) / x * jacobi;
    max_diff = std::fmax(max_diff, std::fabs(alternating - small_x_form));
    EXPECT_NEAR(kolmogorov_survival(x), alternating, 1e-14) << "x = " << x;
  }
  std::printf("max |alternating - jacobi| on [0.9, 1.5]: %.2e (tolerance 1e-14)\n", max_diff);
  EXPECT_LT(max_diff, 1e-14);
}

TEST(StatsKolmogorov, LimitsAndMonotone) {
  EXPECT_EQ(kolmogorov_survival(0.0), 1.0);
  EXPECT_EQ(kolmogorov_survival(-1.0), 1.0);
  EXPECT_NEAR(kolmogorov_survival(0.05), 1.0, 1e-15);
  EXPECT_LT(kolmogorov_survival(5.0), 1e-20);
  double previous = 1.0;
  for (double x = 0.1; x < 4.0; x += 0.01) {
    const double q = kolmogorov_survival(x);
    EXPECT_LE(q, previous) << "x = " << x;
    EXPECT_GE(q, 0.0);
    previous = q;
  }
}

}  // namespace
