// The host side of the trend labels of a classifier (kernels/data/trend_labels.h is the device
// side): the same change and label formulas on the dataset's host copy, for the host-fed pipeline
// and for choosing the threshold on the training split at setup.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lib/data/series_dataset.h"

namespace resident::data {

// The change of kernels/data/trend_labels.h (same fp64 operations, same bits) for the window
// starting at row `start` of the dataset's normalized series, in column `column`, smoothing h.
double host_trend_change(const SeriesDataset& dataset, std::size_t start, std::size_t column,
                         std::size_t smoothing);
// 2 (up) when change > theta, 0 (down) when change < -theta, else 1.
std::int32_t host_trend_label(double change, double theta);

// labels[i] = host_trend_label(host_trend_change(dataset, starts[i], column, smoothing), theta)
// for i < rows: the labels kernels/data/trend_labels.h gives the same windows.
void host_trend_labels(std::int32_t* labels, const SeriesDataset& dataset,
                       const std::size_t* starts, std::size_t rows, std::size_t column,
                       std::size_t smoothing, double theta);

// theta for about equally frequent classes on the training windows: the |change| at rank
// floor(n / 3) in ascending order over the n training windows (so about a third are
// stationary; up and down share the rest by the series' own balance). Throws resident::Error
// for smoothing outside [1, window] or column >= columns.
double balanced_trend_threshold(const SeriesDataset& dataset, std::size_t column,
                                std::size_t smoothing);

}  // namespace resident::data
