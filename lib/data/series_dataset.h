// SeriesDataset: a multivariate series [T, C] held on the device, split by time into training
// and validation windows (series_source.h), normalized on the device with statistics of the
// training range alone, and gathered into batches by one kernel.
//
//   SeriesDataset dataset(make_synthetic_series({.seed = 1}), {.window = 64}, stream);
//   dataset.gather(x, y, selection, batch, stream);    // hot path: one launch
//
// Setup (the constructor): ONE upload of the raw series, the per-column mean and standard
// deviation of rows [0, split().train_rows) by a deterministic reduction kernel
// (kernels/data/column_stats.h: fp64, population variance, std = sqrt(var + epsilon)), every
// column z-scored in place on the device (normalize_columns.h), the target-column indices
// uploaded, then one download of the statistics and of the normalized series (the host copy the
// host-fed pipeline assembles its batches from), and a synchronization. Nothing is allocated
// after construction; gather() only enqueues one kernel.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/data/gather_windows.h"
#include "lib/core/device_buffer.h"
#include "lib/data/series_source.h"

namespace resident::data {

struct WindowSpec {
  std::size_t window = 64;           // L >= 1
  std::size_t horizon = 1;           // h >= 1
  double validation_fraction = 0.2;  // in (0, 1)
  double epsilon = 1e-8;             // added to each column's variance, finite, > 0
};

class SeriesDataset {
 public:
  // Validates the series and the split (resident::Error naming the value and the limit: a window
  // longer than the series, no training or no validation window), then does the setup above on
  // `stream`. Throws also for more than 2^31 - 1 rows or windows.
  SeriesDataset(HostSeries series, const WindowSpec& spec, cudaStream_t stream);
  SeriesDataset(const SeriesDataset&) = delete;
  SeriesDataset& operator=(const SeriesDataset&) = delete;

  const WindowSpec& spec() const noexcept { return spec_; }
  const SeriesSplit& split() const noexcept { return split_; }
  std::size_t steps() const noexcept { return steps_; }
  std::size_t columns() const noexcept { return columns_; }
  std::size_t features() const noexcept { return features_; }  // F, model inputs
  std::size_t targets() const noexcept { return target_columns_.size(); }
  std::size_t outputs() const noexcept { return spec_.horizon * targets(); }
  std::size_t window() const noexcept { return spec_.window; }
  std::size_t horizon() const noexcept { return spec_.horizon; }
  const std::vector<std::string>& column_names() const noexcept { return column_names_; }
  const std::vector<std::size_t>& target_columns() const noexcept { return target_columns_; }
  const std::string& source() const noexcept { return source_; }
  // "csv data.csv: 5000 steps x 6 columns (inputs a, b, ...; targets c), window 64, horizon 1,
  // 3900 training / 937 validation windows"
  std::string describe() const;

  // The normalized series [T, C] on the device, and its host copy (downloaded once at setup).
  const float* values() const noexcept { return values_.data(); }
  const std::vector<float>& host_values() const noexcept { return host_values_; }
  // Per-column statistics of the training range [C] (fp64): on the device and on the host.
  const double* mean() const noexcept { return mean_.data(); }
  const double* stddev() const noexcept { return stddev_.data(); }
  const std::vector<double>& host_mean() const noexcept { return host_mean_; }
  const std::vector<double>& host_stddev() const noexcept { return host_stddev_; }

  // The kernel's view of the series (kernels/data/gather_windows.h).
  kernels::data::WindowLayout layout() const noexcept;
  // Window starts: training window w starts at row w, validation window w at
  // split().validation_first + w.
  std::size_t train_start(std::size_t w) const noexcept { return w; }
  std::size_t validation_start(std::size_t w) const noexcept {
    return split_.validation_first + w;
  }

  // Hot path: x [batch, L, F] and y [batch, outputs] for the windows `selection` names (one
  // launch; kernels/data/gather_windows.h). The caller keeps every selected window in range.
  void gather(float* x, float* y, const kernels::data::WindowSelection& selection,
              std::size_t batch, cudaStream_t stream) const;

  // Host assembly of the same x and y from host_values() for the windows starting at rows
  // starts[0 .. batch) (the host-fed pipeline; the same floats as gather()).
  void gather_host(float* x, float* y, const std::size_t* starts, std::size_t batch) const;

 private:
  WindowSpec spec_;
  SeriesSplit split_;
  std::size_t steps_ = 0, columns_ = 0, features_ = 0;
  std::vector<std::string> column_names_;
  std::vector<std::size_t> target_columns_;
  std::string source_;
  DeviceBuffer<float> values_;                  // [T, C] normalized
  DeviceBuffer<double> mean_, stddev_;          // [C]
  DeviceBuffer<std::uint32_t> target_indices_;  // [targets]
  std::vector<float> host_values_;
  std::vector<double> host_mean_, host_stddev_;
};

}  // namespace resident::data
