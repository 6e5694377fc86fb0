// Initializers: uniform, normal, Xavier, Kaiming, orthogonal.
#include <algorithm>
#include <cmath>

#include "tests/reference/nn_reference.h"
#include "tests/reference/nn_reference_checks.h"

namespace resident::reference {

using detail::require;
using detail::require_size;

namespace {

void require_weight_shape(const char* op, std::span<double> weight, std::size_t out_features,
                          std::size_t in_features) {
  require(out_features > 0 && in_features > 0, op, "a weight needs at least one row and column");
  require_size(op, "weight", weight.size(), out_features * in_features);
}

double dot(std::span<const double> a, std::span<const double> b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// k orthonormal vectors of length n (k <= n): modified Gram-Schmidt, run twice per vector for
// orthogonality to rounding ("twice is enough"), over standard normal draws taken vector by
// vector. Dividing by the positive remaining norm makes R's diagonal positive.
std::vector<std::vector<double>> orthonormal_vectors(std::size_t n, std::size_t k,
                                                     std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<std::vector<double>> q(k, std::vector<double>(n));
  for (std::size_t j = 0; j < k; ++j) {
    for (double& v : q[j]) v = normal(rng);
    for (int pass = 0; pass < 2; ++pass) {
      for (std::size_t i = 0; i < j; ++i) {
        const double projection = dot(q[i], q[j]);
        for (std::size_t e = 0; e < n; ++e) q[j][e] -= projection * q[i][e];
      }
    }
    const double norm = std::sqrt(dot(q[j], q[j]));
    require(norm > 1e-8, "init_orthogonal", "a normal draw was numerically rank deficient");
    for (double& v : q[j]) v /= norm;
  }
  return q;
}

}  // namespace

void init_uniform(std::span<double> out, double low, double high, std::mt19937_64& rng) {
  require(low < high, "init_uniform", "low must be < high");
  std::uniform_real_distribution<double> uniform(low, high);
  for (double& v : out) v = uniform(rng);
}

void init_normal(std::span<double> out, double mean, double stddev, std::mt19937_64& rng) {
  require(stddev > 0.0, "init_normal", "stddev must be > 0");
  std::normal_distribution<double> normal(mean, stddev);
  for (double& v : out) v = normal(rng);
}

void init_xavier_uniform(std::span<double> weight, std::size_t out_features,
                         std::size_t in_features, double gain, std::mt19937_64& rng) {
  require_weight_shape("init_xavier_uniform", weight, out_features, in_features);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(in_features + out_features));
  init_uniform(weight, -bound, bound, rng);
}

void init_xavier_normal(std::span<double> weight, std::size_t out_features, std::size_t in_features,
                        double gain, std::mt19937_64& rng) {
  require_weight_shape("init_xavier_normal", weight, out_features, in_features);
  const double stddev = gain * std::sqrt(2.0 / static_cast<double>(in_features + out_features));
  init_normal(weight, 0.0, stddev, rng);
}

void init_kaiming_uniform(std::span<double> weight, std::size_t out_features,
                          std::size_t in_features, double gain, std::mt19937_64& rng) {
  require_weight_shape("init_kaiming_uniform", weight, out_features, in_features);
  const double bound = gain * std::sqrt(3.0 / static_cast<double>(in_features));
  init_uniform(weight, -bound, bound, rng);
}

void init_kaiming_normal(std::span<double> weight, std::size_t out_features,
                         std::size_t in_features, double gain, std::mt19937_64& rng) {
  require_weight_shape("init_kaiming_normal", weight, out_features, in_features);
  init_normal(weight, 0.0, gain / std::sqrt(static_cast<double>(in_features)), rng);
}

void init_orthogonal(std::span<double> weight, std::size_t rows, std::size_t cols, double gain,
                     std::mt19937_64& rng) {
  require_weight_shape("init_orthogonal", weight, rows, cols);
  const bool tall = rows >= cols;
  const auto q = orthonormal_vectors(std::max(rows, cols), std::min(rows, cols), rng);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      weight[r * cols + c] = gain * (tall ? q[c][r] : q[r][c]);  // columns or rows of Q
    }
  }
}

}  // namespace resident::reference
