#include "tests/stats/chi_square.h"

#include <cmath>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "tests/stats/incomplete_gamma.h"

namespace resident::stats {

namespace {
constexpr double kMinExpectedPerBin = 5.0;
}

double chi_square_survival(double statistic, double dof) {
  if (statistic <= 0.0) return 1.0;
  return regularized_gamma_q(dof / 2.0, statistic / 2.0);
}

ChiSquareResult chi_square_goodness_of_fit(std::span<const std::uint64_t> observed,
                                           std::span<const double> expected,
                                           std::size_t estimated_parameters) {
  constexpr const char* kCall = "chi_square_goodness_of_fit";
  if (observed.size() != expected.size())
    throw Error(kCall, "size mismatch",
                std::to_string(observed.size()) + " observed bins, " +
                    std::to_string(expected.size()) + " expected",
                __FILE__, __LINE__);
  // (observed, expected) of each merged bin.
  std::vector<double> merged_observed;
  std::vector<double> merged_expected;
  double open_observed = 0.0;
  double open_expected = 0.0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (!(std::isfinite(expected[i]) && expected[i] >= 0.0))
      throw Error(kCall, "invalid expected count",
                  "expected[" + std::to_string(i) + "] = " + std::to_string(expected[i]), __FILE__,
                  __LINE__);
    open_observed += static_cast<double>(observed[i]);
    open_expected += expected[i];
    if (open_expected >= kMinExpectedPerBin) {
      merged_observed.push_back(open_observed);
      merged_expected.push_back(open_expected);
      open_observed = open_expected = 0.0;
    }
  }
  if (open_expected > 0.0 || open_observed > 0.0) {
    if (merged_expected.empty()) {
      merged_observed.push_back(open_observed);
      merged_expected.push_back(open_expected);
    } else {
      merged_observed.back() += open_observed;
      merged_expected.back() += open_expected;
    }
  }
  if (merged_expected.size() < estimated_parameters + 2)
    throw Error(kCall, "too few bins",
                std::to_string(merged_expected.size()) + " bins after merging to >= 5 expected, " +
                    std::to_string(estimated_parameters) + " estimated parameters",
                __FILE__, __LINE__);

  ChiSquareResult result;
  for (std::size_t b = 0; b < merged_expected.size(); ++b) {
    const double diff = merged_observed[b] - merged_expected[b];
    result.statistic += diff * diff / merged_expected[b];
  }
  result.bins = merged_expected.size();
  result.dof = result.bins - 1 - estimated_parameters;
  result.p_value = chi_square_survival(result.statistic, static_cast<double>(result.dof));
  return result;
}

}  // namespace resident::stats
