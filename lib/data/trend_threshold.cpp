#include "lib/data/trend_threshold.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/core/error.h"

namespace resident::data {

double host_trend_change(const SeriesDataset& dataset, std::size_t start, std::size_t column,
                         std::size_t smoothing) {
  const std::vector<float>& v = dataset.host_values();
  const std::size_t C = dataset.columns(), L = dataset.window(), h = smoothing;
  double past = 0.0, future = 0.0;
  for (std::size_t k = 0; k < h; ++k) {
    past = past + static_cast<double>(v[(start + L - h + k) * C + column]);
    future = future + static_cast<double>(v[(start + L + k) * C + column]);
  }
  const volatile double mean_future = future / static_cast<double>(h);  // no contraction
  const volatile double mean_past = past / static_cast<double>(h);
  return mean_future - mean_past;
}

std::int32_t host_trend_label(double change, double theta) {
  return change > theta ? 2 : (change < -theta ? 0 : 1);
}

void host_trend_labels(std::int32_t* labels, const SeriesDataset& dataset,
                       const std::size_t* starts, std::size_t rows, std::size_t column,
                       std::size_t smoothing, double theta) {
  for (std::size_t i = 0; i < rows; ++i)
    labels[i] = host_trend_label(host_trend_change(dataset, starts[i], column, smoothing), theta);
}

double balanced_trend_threshold(const SeriesDataset& dataset, std::size_t column,
                                std::size_t smoothing) {
  if (smoothing < 1 || smoothing > dataset.window() || column >= dataset.columns())
    throw Error("balanced_trend_threshold", "invalid argument",
                "smoothing (horizon) = " + std::to_string(smoothing) + ", allowed [1, window = " +
                    std::to_string(dataset.window()) + "]; column = " + std::to_string(column) +
                    ", allowed < " + std::to_string(dataset.columns()),
                __FILE__, __LINE__);
  const std::size_t n = dataset.split().train_windows;
  std::vector<double> magnitude(n);
  for (std::size_t w = 0; w < n; ++w)
    magnitude[w] = std::fabs(host_trend_change(dataset, dataset.train_start(w), column, smoothing));
  const std::size_t rank = n / 3;
  std::nth_element(magnitude.begin(), magnitude.begin() + static_cast<std::ptrdiff_t>(rank),
                   magnitude.end());
  return magnitude[rank];
}

}  // namespace resident::data
