#include "lib/data/series_dataset.h"

#include <climits>
#include <cstring>
#include <utility>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/data/column_stats.h"
#include "kernels/data/normalize_columns.h"

namespace resident::data {

SeriesDataset::SeriesDataset(HostSeries series, const WindowSpec& spec, cudaStream_t stream)
    : spec_(spec) {
  const NvtxRange range("data/series_dataset_setup");
  validate(series);
  split_ = split_series(series.steps, spec.window, spec.horizon, spec.validation_fraction);
  if (series.steps > static_cast<std::size_t>(INT_MAX))
    throw Error("SeriesDataset", "invalid argument",
                "steps = " + std::to_string(series.steps) + ", allowed <= 2147483647", __FILE__,
                __LINE__);
  steps_ = series.steps;
  columns_ = series.columns;
  features_ = series.input_columns;
  column_names_ = std::move(series.column_names);
  target_columns_ = std::move(series.target_columns);
  source_ = std::move(series.source);

  values_ = DeviceBuffer<float>(steps_ * columns_);
  values_.upload(series.values);  // the one bulk upload of the series
  mean_ = DeviceBuffer<double>(columns_);
  stddev_ = DeviceBuffer<double>(columns_);
  kernels::data::launch_column_stats(mean_.data(), stddev_.data(), values_.data(),
                                     split_.train_rows, columns_, spec.epsilon, stream);
  kernels::data::launch_normalize_columns(values_.data(), mean_.data(), stddev_.data(), steps_,
                                          columns_, stream);
  std::vector<std::uint32_t> indices;
  for (const std::size_t c : target_columns_) indices.push_back(static_cast<std::uint32_t>(c));
  target_indices_ = DeviceBuffer<std::uint32_t>(indices.size());
  target_indices_.upload(indices);  // waits for the device: the kernels above are done after it
  host_mean_ = mean_.download();
  host_stddev_ = stddev_.download();
  host_values_ = values_.download();
}

std::string SeriesDataset::describe() const {
  std::string inputs, targets;
  for (std::size_t c = 0; c < features_; ++c)
    inputs += (inputs.empty() ? "" : ", ") + column_names_[c];
  for (const std::size_t c : target_columns_)
    targets += (targets.empty() ? "" : ", ") + column_names_[c];
  return source_ + ": " + std::to_string(steps_) + " steps x " + std::to_string(columns_) +
         " columns (inputs " + inputs + "; targets " + targets + "), window " +
         std::to_string(spec_.window) + ", horizon " + std::to_string(spec_.horizon) + ", " +
         std::to_string(split_.train_windows) + " training / " +
         std::to_string(split_.validation_windows) + " validation windows";
}

kernels::data::WindowLayout SeriesDataset::layout() const noexcept {
  return {values_.data(),   steps_,          columns_,
          spec_.window,     features_,       spec_.horizon,
          target_indices_.data(), target_columns_.size()};
}

void SeriesDataset::gather(float* x, float* y, const kernels::data::WindowSelection& selection,
                           std::size_t batch, cudaStream_t stream) const {
  kernels::data::launch_gather_windows(x, y, layout(), selection, batch, stream);
}

void SeriesDataset::gather_host(float* x, float* y, const std::size_t* starts,
                                std::size_t batch) const {
  const std::size_t L = spec_.window, F = features_, C = columns_, J = target_columns_.size();
  for (std::size_t i = 0; i < batch; ++i) {
    const std::size_t s = starts[i];
    if (s + L + spec_.horizon > steps_)
      throw Error("SeriesDataset::gather_host", "invalid argument",
                  "window start " + std::to_string(s) + " + window " + std::to_string(L) +
                      " + horizon " + std::to_string(spec_.horizon) + " > " +
                      std::to_string(steps_) + " rows",
                  __FILE__, __LINE__);
    float* xi = x + i * L * F;
    const float* rows = host_values_.data() + s * C;
    if (F == C) {
      std::memcpy(xi, rows, L * F * sizeof(float));
    } else {
      for (std::size_t t = 0; t < L; ++t) std::memcpy(xi + t * F, rows + t * C, F * sizeof(float));
    }
    float* yi = y + i * spec_.horizon * J;
    for (std::size_t k = 0; k < spec_.horizon; ++k)
      for (std::size_t j = 0; j < J; ++j)
        yi[k * J + j] = host_values_[(s + L + k) * C + target_columns_[j]];
  }
}

}  // namespace resident::data
