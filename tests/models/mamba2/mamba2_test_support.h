// Shared set-up of the Mamba2 tests: random parameters in ranges where every path of the model
// matters (not the init), random inputs, and the comparison printout (the model tests' shared
// agreement, tests/models/support/agreement.h, printed with Mamba2's 40-character name column).
#pragma once

#include <random>
#include <string>
#include <vector>

#include "tests/models/support/agreement.h"
#include "tests/reference/mamba2_reference.h"

namespace resident::test::mamba2 {

namespace ref = resident::reference;

inline void fill_uniform(std::vector<double>& v, double low, double high, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(low, high);
  for (double& x : v) x = u(rng);
}

// Weights U(-0.5, 0.5); norm weights U(0.5, 1.5); A_log U(-1, 1.5) (A in [-4.5, -0.37]);
// dt_bias U(-2, 0.5) (dt in about [0.13, 0.97]); D U(0.5, 1.5).
inline ref::Mamba2Params random_params(const ref::Mamba2Dims& dims, std::mt19937_64& rng) {
  ref::Mamba2Params p = ref::mamba2_zero_params(dims);
  for (auto& [name, tensor] : ref::mamba2_named_tensors(p)) {
    const bool norm = name.find("norm") != std::string::npos;
    if (norm)
      fill_uniform(*tensor, 0.5, 1.5, rng);
    else if (name.find("A_log") != std::string::npos)
      fill_uniform(*tensor, -1.0, 1.5, rng);
    else if (name.find("dt_bias") != std::string::npos)
      fill_uniform(*tensor, -2.0, 0.5, rng);
    else if (name.find("mixer.D") != std::string::npos)
      fill_uniform(*tensor, 0.5, 1.5, rng);
    else
      fill_uniform(*tensor, -0.5, 0.5, rng);
  }
  return p;
}

inline std::vector<double> random_values(std::size_t n, double low, double high,
                                         std::mt19937_64& rng) {
  std::vector<double> v(n);
  fill_uniform(v, low, high, rng);
  return v;
}

// max |a - b| / (atol + rtol |b|) over the elements: <= 1 passes (a non-finite got fails).
using resident::test::Agreement;
using resident::test::agreement;

inline void print_agreement(const std::string& what, const Agreement& a, double rtol,
                            double atol) {
  resident::test::print_agreement(what, a, rtol, atol, 40);
}

}  // namespace resident::test::mamba2
