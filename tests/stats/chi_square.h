// Pearson's chi-square goodness-of-fit test of observed counts against expected counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace resident::stats {

struct ChiSquareResult {
  double statistic = 0.0;  // sum over merged bins of (O - E)^2 / E
  std::size_t dof = 0;     // merged bins - 1 - estimated_parameters
  double p_value = 1.0;    // chi_square_survival(statistic, dof)
  std::size_t bins = 0;    // bins after merging
};

// P(X > statistic) for X ~ chi-square(dof): Q(dof / 2, statistic / 2).
double chi_square_survival(double statistic, double dof);

// Bins are merged in index order so that every merged bin expects at least 5: consecutive
// bins accumulate until their expected count reaches 5, and a remainder at the end expecting
// less than 5 joins the last merged bin. `expected` should sum to the observed total (E = n
// P(i)). Throws resident::Error when the spans differ in size, an expected count is negative
// or not finite, or fewer than estimated_parameters + 2 bins remain after merging.
ChiSquareResult chi_square_goodness_of_fit(std::span<const std::uint64_t> observed,
                                           std::span<const double> expected,
                                           std::size_t estimated_parameters = 0);

}  // namespace resident::stats
