#include "tests/stats/kolmogorov.h"

#include <cmath>
#include <numbers>

namespace resident::stats {

double kolmogorov_survival(double x) {
  if (!(x > 0.0)) return 1.0;
  constexpr double kPi = std::numbers::pi;
  if (x < 1.18) {
    // Jacobi-transformed series of the CDF: terms shrink as exp(-pi^2 (2k-1)^2 / (8 x^2)).
    const double factor = -kPi * kPi / (8.0 * x * x);
    double cdf_sum = 0.0;
    for (int k = 1; k <= 20; ++k) {
      const double odd = 2.0 * k - 1.0;
      const double term = std::exp(factor * odd * odd);
      cdf_sum += term;
      if (term < 1e-17 * cdf_sum) break;
    }
    return 1.0 - std::sqrt(2.0 * kPi) / x * cdf_sum;
  }
  // Alternating series: terms shrink as exp(-2 k^2 x^2) <= exp(-2.78 k^2).
  double sum = 0.0;
  double sign = 1.0;
  for (int k = 1; k <= 100; ++k) {
    const double term = std::exp(-2.0 * k * k * x * x);
    sum += sign * term;
    if (term < 1e-17 * sum) break;
    sign = -sign;
  }
  return 2.0 * sum;
}

}  // namespace resident::stats
