// Regularized incomplete gamma functions P(a, x) = gamma(a, x) / Gamma(a) and
// Q(a, x) = Gamma(a, x) / Gamma(a) = 1 - P(a, x), for a > 0, x >= 0.
// Q(k/2, x/2) is the survival function of the chi-square distribution with k degrees of freedom.
#pragma once

namespace resident::stats {

// For x < a + 1 the power series
//   P(a, x) = e^-x x^a / Gamma(a + 1) * sum_{n>=0} x^n / ((a + 1) ... (a + n)),
// otherwise the continued fraction
//   Q(a, x) = e^-x x^a / Gamma(a) * 1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / ...))
// evaluated by the modified Lentz method; each converges fast on its side and the other
// function is 1 minus it. The prefactor's exponent -x + a ln x - ln Gamma(a) cancels, so the
// relative error grows with its terms: about 1e-16 * (x + a |ln x| + 100), i.e. ~1e-14 for
// a, x up to ~20 and ~1e-12 at a = 1000.
// Throws resident::Error for a <= 0, x < 0, NaN, or no convergence.
double regularized_gamma_p(double a, double x);
double regularized_gamma_q(double a, double x);

}  // namespace resident::stats
