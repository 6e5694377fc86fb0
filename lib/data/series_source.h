// The host side of a supervised time-series dataset: a multivariate series [T, C] and its two
// sources -- a seeded synthetic generator with learnable structure, or a CSV file read by
// load_market_csv -- and the split of its windows by time (lib/data/series_dataset.h uploads
// the series once and does everything else on the device).
//
// Samples. A sample starting at row s is the window of rows s .. s + L - 1 of the input columns
// (the first F of the C columns) and, as its target, the next h rows s + L .. s + L + h - 1 of
// the target columns: outputs = h * targets values, horizon-major (y[k * targets + j] is target
// column j at row s + L + k).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace resident::data {

struct HostSeries {
  std::size_t steps = 0;                  // T >= 1
  std::size_t columns = 0;                // C >= 1
  std::vector<std::string> column_names;  // [C]
  std::vector<float> values;              // [T, C] row-major: values[t * C + c]
  std::size_t input_columns = 0;          // F: columns 0 .. F - 1 are the model's inputs
  std::vector<std::size_t> target_columns;  // column indices (< C) of the targets, >= 1
  std::string source;                     // "synthetic(seed 3, 20000 steps)", "csv <path>"
};

// Throws resident::Error naming the first inconsistency (sizes, indices, names).
void validate(const HostSeries& series);

// ---------------------------------------------------------------------------------------------
// Synthetic series

struct SyntheticSeriesConfig {
  std::uint64_t seed = 0;
  std::size_t steps = 20000;            // T >= 1
  std::size_t features = 6;             // C = F >= 1 (column 0 is the target)
  std::size_t season_period = 24;       // P >= 2 steps
  double season_amplitude = 1.0;        // A, finite, >= 0
  // AR(2) coefficients (a1, a2) of the latent state in regime 0 and regime 1; each pair must be
  // stationary (|a2| < 1, a2 + a1 < 1, a2 - a1 < 1).
  double calm_ar1 = 1.5, calm_ar2 = -0.75;          // damped oscillation, period ~12 steps
  double volatile_ar1 = 0.6, volatile_ar2 = 0.2;    // persistent, non-oscillating
  double innovation_std = 0.3;          // sigma of the AR(2) shock in regime 0, finite, > 0
  double volatile_multiplier = 2.0;     // regime 1's shock std = sigma * this, finite, >= 1
  double regime_persistence = 0.995;    // P(regime_t == regime_{t-1}), in [0, 1]
  double lead_strength = 0.8;           // in [0, 1]
  double feature_loading = 0.8;         // in [0, 1]
  double observation_noise = 0.1;       // finite, >= 0
};

// Throws resident::Error listing every invalid field as "<field> = <value>, allowed <range>".
void validate(const SyntheticSeriesConfig& config);

// Generates T steps in double and stores them as float. Latent regime r_t in {0, 1}, latent
// AR(2) state s_t, shocks e_0 .. e_T ~ N(0, 1):
//   r_0 = 0; r_t = r_{t-1} with probability regime_persistence, else 1 - r_{t-1}
//   s_t = a1(r_t) s_{t-1} + a2(r_t) s_{t-2} + sigma(r_t) e_t        (s_{-1} = s_{-2} = 0)
// Columns at t:
//   0 "target":  s_t + A sin(2 pi t / P) + observation_noise * n_t
//   1 "lead":    lead_strength * e_{t+1} + sqrt(1 - lead_strength^2) * n'_t   (the next shock,
//                partly revealed one step early: the target is predictable beyond its own past)
//   k >= 2 "x<k>": b_k s_t + sqrt(1 - b_k^2) q_k,t with b_k = feature_loading^(k - 1) and q_k an
//                AR(1) noise of coefficient 0.9 and unit variance (q_k,0 = its first draw)
// (n, n', and q's innovations are further N(0, 1) draws). Inputs: all C columns; target: column
// 0. Randomness: one std::mt19937_64 seeded with `seed`; a uniform is the draw's top 53 bits
// times 2^-53, a normal is Box-Muller's cosine branch on two uniforms; the draws are taken in this
// order: e_0 .. e_T, then for t = 0 .. T - 1: the regime's uniform (t > 0), n_t, n'_t (F >= 2),
// q's innovations for k = 2 .. F - 1. Same seed, same series (given the same libm).
HostSeries make_synthetic_series(const SyntheticSeriesConfig& config);

// ---------------------------------------------------------------------------------------------
// CSV

struct CsvSeriesOptions {
  std::string path;
  std::vector<std::string> target_columns;   // >= 1 names
  // The input columns, in this order. Empty: every column of the file except the date column,
  // in file order. Target columns need not be inputs.
  std::vector<std::string> feature_columns;
  // load_market_csv's price column (every value > 0): the loader needs one; its returns are not
  // used. The loader's series has one step less than the file has data rows (the last row only
  // contributes its price), so the last row is not part of the series.
  std::string price_column = "close";
  std::string date_column = "date";  // never parsed; "" means none
};

// Reads the file with load_market_csv (parsing only the input, target and price columns): its
// errors name "<path>:<line>:<column>". The series' columns are the inputs followed by the
// target columns that are not inputs. Throws resident::Error "target column missing" (or
// "feature column missing") naming the path, the header line, the name and the file's columns,
// and "invalid argument" for no target column or a name given twice.
HostSeries load_csv_series(const CsvSeriesOptions& options);

// ---------------------------------------------------------------------------------------------
// Split by time

// Rows [0, train_rows) are the training range: a training window's inputs and targets lie in
// it (starts 0 .. train_windows - 1). Validation windows start at or after train_rows (starts
// validation_first .. validation_first + validation_windows - 1), so no validation input or target
// is in the training range, and every training target row is < every validation window's first
// row.
struct SeriesSplit {
  std::size_t train_rows = 0;
  std::size_t train_windows = 0;
  std::size_t validation_first = 0;  // == train_rows
  std::size_t validation_windows = 0;
};

// train_rows = floor((1 - validation_fraction) * steps). Throws resident::Error naming the value
// and the limit: window or horizon 0, window + horizon > steps ("window longer than the
// series"), validation_fraction outside (0, 1), a training range too short for one window, a
// validation range too short for one window.
SeriesSplit split_series(std::size_t steps, std::size_t window, std::size_t horizon,
                         double validation_fraction);

}  // namespace resident::data
