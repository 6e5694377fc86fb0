// Two-sample Kolmogorov-Smirnov test: are samples a and b drawn from the same distribution?
#pragma once

#include <cstddef>
#include <span>

namespace resident::stats {

struct KsTwoSampleResult {
  double statistic = 0.0;    // D = sup_x |F_a(x) - F_b(x)|
  double p_value = 1.0;      // asymptotic P(D >= statistic) under the null
  double effective_n = 0.0;  // n m / (n + m)
};

// D over the empirical CDFs, each evaluated after all values equal to x (so ties within and
// across samples are handled). p_value = kolmogorov_survival(sqrt(n m / (n + m)) * D), the
// Kolmogorov limit without a small-sample correction. Against the exact two-sample p-value
// (ks_two_sample_exact_p) at p in [1e-3, 0.3] and n, m >= 300 it is conservative: between
// 0 and +20% relative above the exact value (within 1% for n = m = 1000), while Stephens'
// one-sample correction (sqrt(ne) + 0.12 + 0.11 / sqrt(ne)) falls up to 8% below it
// (tests/stats/ks_two_sample_test.cpp). With ties (discrete data) the test is conservative
// too. Both samples must be non-empty and free of NaN (throws resident::Error).
KsTwoSampleResult ks_two_sample(std::span<const double> a, std::span<const double> b);

// Exact P(D_{n,m} >= d) for two samples of sizes n and m from one continuous distribution
// (no ties), by counting the lattice paths from (0, 0) to (n, m) that reach
// |i/n - j/m| >= d, as probabilities (each step a convex combination, no overflow).
// O(n m) time, O(m) memory. D takes values k / lcm(n, m); `d` is compared with a relative
// tolerance of 1e-9 so a d computed in floating point hits its lattice value.
double ks_two_sample_exact_p(std::size_t n, std::size_t m, double d);

}  // namespace resident::stats
