// Survival function of the Kolmogorov distribution, the limit law of sqrt(n) * D_n for the
// Kolmogorov-Smirnov statistic: Q_K(x) = P(K > x), K = sup_t |B(t)| of a Brownian bridge.
#pragma once

namespace resident::stats {

// Q_K(x) = 2 * sum_{k>=1} (-1)^(k-1) exp(-2 k^2 x^2)                       for x >= 1.18,
//        = 1 - sqrt(2 pi)/x * sum_{k>=1} exp(-(2k-1)^2 pi^2 / (8 x^2))      for 0 < x < 1.18
// (the same function; each series converges in a few terms on its side), 1 for x <= 0.
// Absolute error below 1e-15.
double kolmogorov_survival(double x);

}  // namespace resident::stats
