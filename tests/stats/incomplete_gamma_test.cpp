// Regularized incomplete gamma: chi-square upper-tail table values, closed forms, and
// continuity across the switch between the series and the continued fraction.
#include "tests/stats/incomplete_gamma.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "kernels/core/error.h"

namespace {

using resident::stats::regularized_gamma_p;
using resident::stats::regularized_gamma_q;

// Upper-tail critical values of chi-square(df) (NIST/SEMATECH e-Handbook of Statistical
// Methods, section 1.3.6.7.4; the same in any textbook table): P(X > x) = tail with
// P(X > x) = Q(df/2, x/2). The table rounds x to 3 decimals, which moves the tail by at most
// pdf(x) * 5e-4, below 3e-4 of the tail for every row here; tolerance 5e-4 relative.
TEST(StatsIncompleteGamma, MatchesChiSquareTable) {
  struct Row {
    double df, x, tail;
  };
  const Row rows[] = {{1, 2.706, 0.10},     {1, 3.841, 0.05},     {1, 6.635, 0.01},
                      {1, 10.828, 0.001},   {2, 5.991, 0.05},     {2, 9.210, 0.01},
                      {5, 11.070, 0.05},    {5, 15.086, 0.01},    {10, 15.987, 0.10},
                      {10, 18.307, 0.05},   {10, 23.209, 0.01},   {10, 29.588, 0.001},
                      {30, 43.773, 0.05},   {30, 50.892, 0.01},   {100, 124.342, 0.05},
                      {100, 135.807, 0.01}, {100, 149.449, 0.001}};
  double worst = 0.0;
  for (const Row& row : rows) {
    const double q = regularized_gamma_q(row.df / 2.0, row.x / 2.0);
    const double relative = std::fabs(q - row.tail) / row.tail;
    worst = std::fmax(worst, relative);
    std::printf("df %5.0f  x %8.3f  Q = %.6f  table %.3f  relative error %.1e\n", row.df, row.x, q,
                row.tail, relative);
    EXPECT_LE(relative, 5e-4) << "df = " << row.df << ", x = " << row.x;
  }
  std::printf("worst relative error %.1e (tolerance 5e-4)\n", worst);
}

// The error bound documented in incomplete_gamma.h, times 4: relative
// 4e-16 * (x + a |ln x| + 100), plus 1e-15 absolute for a side computed as 1 - the other.
double tolerance(double want, double a, double x) {
  const double spread = x + (x > 0.0 ? a * std::fabs(std::log(x)) : 0.0) + 100.0;
  return 1e-15 + 4e-16 * spread * std::fabs(want);
}

void expect_close(double got, double want, const char* what, double a, double x) {
  EXPECT_LE(std::fabs(got - want), tolerance(want, a, x))
      << what << " a = " << a << " x = " << x << " got " << got << " want " << want;
}

TEST(StatsIncompleteGamma, ClosedForms) {
  double max_relative = 0.0;
  for (double x : {0.0, 1e-8, 0.01, 0.3, 1.0, 1.99, 2.0, 2.01, 5.0, 20.0, 80.0}) {
    // Q(1, x) = e^-x
    expect_close(regularized_gamma_q(1.0, x), std::exp(-x), "Q(1,x)", 1.0, x);
    // Q(1/2, x) = erfc(sqrt(x))
    expect_close(regularized_gamma_q(0.5, x), std::erfc(std::sqrt(x)), "Q(1/2,x)", 0.5, x);
    // Q(n, x) = e^-x sum_{k<n} x^k / k! for integer n (the Poisson CDF at n - 1)
    for (int n : {2, 3, 7, 25, 60}) {
      long double term = std::exp(-static_cast<long double>(x));
      long double sum = 0.0L;
      for (int k = 0; k < n; ++k) {
        sum += term;
        term *= static_cast<long double>(x) / (k + 1);
      }
      const double q = regularized_gamma_q(n, x);
      if (sum > 1e-300L)
        max_relative = std::fmax(
            max_relative, std::fabs(q - static_cast<double>(sum)) / static_cast<double>(sum));
      expect_close(q, static_cast<double>(sum), "Q(n,x)", n, x);
      expect_close(regularized_gamma_p(n, x), 1.0 - static_cast<double>(sum), "P(n,x)", n, x);
    }
  }
  std::printf("max relative error of Q(n, x) vs the Poisson sum: %.1e\n", max_relative);
}

// Q(a + 1, x) = Q(a, x) + x^a e^-x / Gamma(a + 1), for non-integer a on both sides of the
// switch at x = a + 1.
TEST(StatsIncompleteGamma, RecurrenceInA) {
  for (double a : {0.3, 2.7, 14.5, 99.25, 400.5}) {
    for (double scale : {0.2, 0.9, 1.0, 1.1, 3.0}) {
      const double x = a * scale + (scale == 1.0 ? 1.0 : 0.0);
      const double step = std::exp(a * std::log(x) - x - std::lgamma(a + 1.0));
      expect_close(regularized_gamma_q(a + 1.0, x), regularized_gamma_q(a, x) + step, "recurrence",
                   a, x);
    }
  }
}

TEST(StatsIncompleteGamma, ContinuousAcrossTheSwitch) {
  for (double a : {0.5, 3.0, 40.0, 1000.0}) {
    const double x = a + 1.0;
    const double below = regularized_gamma_q(a, std::nextafter(x, 0.0));  // series
    const double at = regularized_gamma_q(a, x);                          // continued fraction
    std::printf("a = %g: Q just below x = a+1: %.16f, at: %.16f\n", a, below, at);
    EXPECT_LE(std::fabs(below - at), tolerance(at, a, x)) << "a = " << a;
    EXPECT_NEAR(regularized_gamma_p(a, x) + regularized_gamma_q(a, x), 1.0, 1e-15);
  }
}

TEST(StatsIncompleteGamma, LimitsAndErrors) {
  EXPECT_EQ(regularized_gamma_q(3.0, 0.0), 1.0);
  EXPECT_EQ(regularized_gamma_p(3.0, 0.0), 0.0);
  EXPECT_EQ(regularized_gamma_q(3.0, INFINITY), 0.0);
  EXPECT_THROW(regularized_gamma_q(0.0, 1.0), resident::Error);
  EXPECT_THROW(regularized_gamma_q(-1.0, 1.0), resident::Error);
  EXPECT_THROW(regularized_gamma_q(1.0, -1.0), resident::Error);
  EXPECT_THROW(regularized_gamma_q(NAN, 1.0), resident::Error);
  EXPECT_THROW(regularized_gamma_q(1.0, NAN), resident::Error);
}

}  // namespace
