#include "tests/stats/ks_two_sample.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "tests/stats/kolmogorov.h"

namespace resident::stats {

KsTwoSampleResult ks_two_sample(std::span<const double> a, std::span<const double> b) {
  if (a.empty() || b.empty())
    throw Error("ks_two_sample", "empty sample",
                "sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size()), __FILE__,
                __LINE__);
  std::vector<double> x(a.begin(), a.end());
  std::vector<double> y(b.begin(), b.end());
  const auto is_nan = [](double v) { return std::isnan(v); };
  if (std::any_of(x.begin(), x.end(), is_nan) || std::any_of(y.begin(), y.end(), is_nan))
    throw Error("ks_two_sample", "NaN in a sample", "", __FILE__, __LINE__);
  std::sort(x.begin(), x.end());
  std::sort(y.begin(), y.end());

  const double n = static_cast<double>(x.size());
  const double m = static_cast<double>(y.size());
  std::size_t i = 0;
  std::size_t j = 0;
  double statistic = 0.0;
  while (i < x.size() && j < y.size()) {
    const double value = std::min(x[i], y[j]);
    while (i < x.size() && x[i] == value) ++i;
    while (j < y.size() && y[j] == value) ++j;
    statistic =
        std::max(statistic, std::fabs(static_cast<double>(i) / n - static_cast<double>(j) / m));
  }
  // Past the end of one sample the gap only shrinks toward 0, so the loop saw the supremum.
  KsTwoSampleResult result;
  result.statistic = statistic;
  result.effective_n = n * m / (n + m);
  result.p_value = kolmogorov_survival(std::sqrt(result.effective_n) * statistic);
  return result;
}

double ks_two_sample_exact_p(std::size_t n, std::size_t m, double d) {
  if (n == 0 || m == 0)
    throw Error("ks_two_sample_exact_p", "empty sample",
                "sizes " + std::to_string(n) + " and " + std::to_string(m), __FILE__, __LINE__);
  if (!(d > 0.0)) return 1.0;
  // A lattice point (i, j) has |i/n - j/m| = |i m - j n| / (n m); it reaches d when
  // |i m - j n| >= threshold = ceil(d n m) (with tolerance for d computed in floating point).
  const double scaled = d * static_cast<double>(n) * static_cast<double>(m);
  const double threshold = std::ceil(scaled * (1.0 - 1e-9));
  const auto reaches = [&](std::size_t i, std::size_t j) {
    const double gap = std::fabs(static_cast<double>(i) * static_cast<double>(m) -
                                 static_cast<double>(j) * static_cast<double>(n));
    return gap >= threshold;
  };
  // reached[j] after row i: the probability that a uniformly random lattice path to (i, j)
  // has reached d, where its last step came from (i-1, j) with probability i/(i+j) and from
  // (i, j-1) with probability j/(i+j). Convex combinations only: no cancellation, so small
  // p-values keep their relative precision.
  std::vector<double> reached(m + 1, 0.0);
  for (std::size_t i = 0; i <= n; ++i) {
    for (std::size_t j = 0; j <= m; ++j) {
      if (reaches(i, j)) {
        reached[j] = 1.0;
      } else if (i == 0 && j == 0) {
        reached[j] = 0.0;
      } else {
        const double total = static_cast<double>(i + j);
        const double from_left = i > 0 ? reached[j] * static_cast<double>(i) / total : 0.0;
        const double from_below = j > 0 ? reached[j - 1] * static_cast<double>(j) / total : 0.0;
        reached[j] = from_left + from_below;
      }
    }
  }
  return std::clamp(reached[m], 0.0, 1.0);
}

}  // namespace resident::stats
