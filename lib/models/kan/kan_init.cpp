#include "lib/models/kan/kan_init.h"

#include <cmath>
#include <random>
#include <string>

#include "kernels/core/error.h"
#include "lib/nn/initializers.h"

namespace resident::models {

std::vector<double> kan_bases_at(const KanConfig& config, double x) {
  const int k = static_cast<int>(config.spline_order), g = static_cast<int>(config.grid_size);
  const int nb = g + k;
  const double inv_h = static_cast<double>(g) / (config.grid_max - config.grid_min);
  const double s = (x - config.grid_min) * inv_h + k;
  const double j = std::floor(s);
  std::vector<double> bases(static_cast<std::size_t>(nb), 0.0);
  if (!(j >= 0.0 && j < static_cast<double>(g + 2 * k))) return bases;
  const double f = s - j;
  std::vector<double> value(static_cast<std::size_t>(k) + 1, 0.0);
  value[0] = 1.0;
  for (int p = 1; p <= k; ++p)
    for (int r = p; r >= 0; --r) {
      const double left = r > 0 ? value[r - 1] : 0.0;
      value[r] = ((f + (p - r)) * left + ((r + 1) - f) * value[r]) / p;
    }
  const int first = static_cast<int>(j) - k;
  for (int r = 0; r <= k; ++r)
    if (first + r >= 0 && first + r < nb) bases[first + r] = value[r];
  return bases;
}

std::vector<double> kan_spline_fit_matrix(const KanConfig& config) {
  const std::size_t points = config.grid_size + 1, nb = config.grid_size + config.spline_order;
  const double h = (config.grid_max - config.grid_min) / static_cast<double>(config.grid_size);
  std::vector<double> c(points * nb);  // C [points, nb]
  for (std::size_t j = 0; j < points; ++j) {
    const std::vector<double> b =
        kan_bases_at(config, config.grid_min + static_cast<double>(j) * h);
    for (std::size_t m = 0; m < nb; ++m) c[j * nb + m] = b[m];
  }
  // Z = (C C^T)^-1 by Gauss-Jordan elimination with partial pivoting on [C C^T | I].
  const std::size_t n = points;
  std::vector<double> aug(n * 2 * n, 0.0);
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t q = 0; q < n; ++q) {
      double dot = 0.0;
      for (std::size_t m = 0; m < nb; ++m) dot += c[r * nb + m] * c[q * nb + m];
      aug[r * 2 * n + q] = dot;
    }
    aug[r * 2 * n + n + r] = 1.0;
  }
  for (std::size_t col = 0; col < n; ++col) {
    std::size_t pivot = col;
    for (std::size_t r = col + 1; r < n; ++r)
      if (std::fabs(aug[r * 2 * n + col]) > std::fabs(aug[pivot * 2 * n + col])) pivot = r;
    if (!(std::fabs(aug[pivot * 2 * n + col]) > 1e-12))
      throw Error("kan_spline_fit_matrix", "singular collocation matrix",
                  "grid_size = " + std::to_string(config.grid_size) +
                      ", spline_order = " + std::to_string(config.spline_order),
                  __FILE__, __LINE__);
    if (pivot != col)
      for (std::size_t q = 0; q < 2 * n; ++q)
        std::swap(aug[col * 2 * n + q], aug[pivot * 2 * n + q]);
    const double inv = 1.0 / aug[col * 2 * n + col];
    for (std::size_t q = 0; q < 2 * n; ++q) aug[col * 2 * n + q] *= inv;
    for (std::size_t r = 0; r < n; ++r) {
      if (r == col) continue;
      const double factor = aug[r * 2 * n + col];
      if (factor == 0.0) continue;
      for (std::size_t q = 0; q < 2 * n; ++q) aug[r * 2 * n + q] -= factor * aug[col * 2 * n + q];
    }
  }
  // P [nb, n] = C^T Z.
  std::vector<double> p(nb * n, 0.0);
  for (std::size_t m = 0; m < nb; ++m)
    for (std::size_t q = 0; q < n; ++q) {
      double sum = 0.0;
      for (std::size_t r = 0; r < n; ++r) sum += c[r * nb + m] * aug[r * 2 * n + n + q];
      p[m * n + q] = sum;
    }
  return p;
}

std::vector<KanLayerInit> kan_initial_values(const KanConfig& config,
                                             const std::vector<std::size_t>& widths,
                                             std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const nn::Initializer kaiming = nn::Initializer::kaiming_uniform(std::sqrt(1.0 / 3.0));
  const std::vector<double> fit = kan_spline_fit_matrix(config);
  const std::size_t points = config.grid_size + 1, nb = config.grid_size + config.spline_order;
  const double noise_scale = 0.1 / static_cast<double>(config.grid_size);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<KanLayerInit> layers;
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    const std::size_t in = widths[l], out = widths[l + 1];
    KanLayerInit init;
    init.base_weight = nn::initial_values(kaiming, out, in, rng);
    std::vector<double> noise(points * in * out);  // [points, in, out]
    for (double& v : noise) v = (unit(rng) - 0.5) * noise_scale;
    init.spline_weight.resize(out * in * nb);
    for (std::size_t o = 0; o < out; ++o)
      for (std::size_t i = 0; i < in; ++i)
        for (std::size_t m = 0; m < nb; ++m) {
          double sum = 0.0;
          for (std::size_t j = 0; j < points; ++j)
            sum += fit[m * points + j] * noise[(j * in + i) * out + o];
          init.spline_weight[(o * in + i) * nb + m] = static_cast<float>(sum);
        }
    init.spline_scaler = nn::initial_values(kaiming, out, in, rng);
    layers.push_back(std::move(init));
  }
  return layers;
}

}  // namespace resident::models
