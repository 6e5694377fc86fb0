#include "tests/stats/incomplete_gamma.h"

#include <cmath>
#include <limits>
#include <string>

#include "kernels/core/error.h"

namespace resident::stats {

namespace {

constexpr double kRelativeTolerance = 1e-16;
constexpr double kTiny = 1e-300;  // stands in for a zero denominator in Lentz's method

void check_arguments(const char* call, double a, double x) {
  if (!(a > 0.0) || !(x >= 0.0) || std::isinf(a))
    throw Error(call, "invalid argument",
                "a = " + std::to_string(a) + " (allowed > 0, finite), x = " + std::to_string(x) +
                    " (allowed >= 0)",
                __FILE__, __LINE__);
}

int max_iterations(double a) {
  // Both expansions need O(sqrt(a)) terms near x ~ a; far more than that is a failure.
  return 1000 + 100 * static_cast<int>(std::sqrt(a));
}

// log of the common prefactor e^-x x^a / Gamma(a).
double log_prefactor(double a, double x) { return -x + a * std::log(x) - std::lgamma(a); }

// P(a, x) by the power series; for x < a + 1.
double series_p(double a, double x) {
  if (x == 0.0) return 0.0;
  double term = 1.0 / a;  // x^n / (a (a+1) ... (a+n)) for n = 0
  double sum = term;
  const int limit = max_iterations(a);
  for (int n = 1; n <= limit; ++n) {
    term *= x / (a + n);
    sum += term;
    if (std::fabs(term) < std::fabs(sum) * kRelativeTolerance)
      return sum * std::exp(log_prefactor(a, x));
  }
  throw Error("regularized_gamma_p series", "no convergence",
              "a = " + std::to_string(a) + ", x = " + std::to_string(x), __FILE__, __LINE__);
}

// Q(a, x) by the continued fraction (modified Lentz); for x >= a + 1.
double continued_fraction_q(double a, double x) {
  double b = x + 1.0 - a;
  double c = 1.0 / kTiny;
  double d = 1.0 / b;
  double fraction = d;
  const int limit = max_iterations(a);
  for (int i = 1; i <= limit; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double delta = d * c;
    fraction *= delta;
    if (std::fabs(delta - 1.0) < kRelativeTolerance * 4)
      return std::exp(log_prefactor(a, x)) * fraction;
  }
  throw Error("regularized_gamma_q continued fraction", "no convergence",
              "a = " + std::to_string(a) + ", x = " + std::to_string(x), __FILE__, __LINE__);
}

}  // namespace

double regularized_gamma_p(double a, double x) {
  check_arguments("regularized_gamma_p", a, x);
  if (std::isinf(x)) return 1.0;
  return x < a + 1.0 ? series_p(a, x) : 1.0 - continued_fraction_q(a, x);
}

double regularized_gamma_q(double a, double x) {
  check_arguments("regularized_gamma_q", a, x);
  if (std::isinf(x)) return 0.0;
  return x < a + 1.0 ? 1.0 - series_p(a, x) : continued_fraction_q(a, x);
}

}  // namespace resident::stats
