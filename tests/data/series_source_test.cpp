// The host side of the supervised dataset (CPU, runs in CI): the synthetic generator is
// deterministic, has the documented shape, and its target is predictable beyond its last value;
// the split by time never leaks (property over many configurations); invalid configurations,
// splits and CSV columns are named in the errors.
#include "lib/data/series_source.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace resident;
using namespace resident::data;

std::string error_text(const std::function<void()>& body, std::string* error_name = nullptr) {
  try {
    body();
  } catch (const Error& e) {
    if (error_name != nullptr) *error_name = e.error_name();
    return e.what();
  }
  return "(no throw)";
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "missing \"" << part << "\" in: " << text;
}

// ---------------------------------------------------------------------------------------------
// Synthetic series

TEST(SyntheticSeries, ShapesNamesAndTarget) {
  SyntheticSeriesConfig config;
  config.steps = 500;
  config.features = 5;
  const HostSeries s = make_synthetic_series(config);
  EXPECT_EQ(s.steps, 500u);
  EXPECT_EQ(s.columns, 5u);
  EXPECT_EQ(s.input_columns, 5u);
  EXPECT_EQ(s.values.size(), 2500u);
  EXPECT_EQ(s.column_names, (std::vector<std::string>{"target", "lead", "x2", "x3", "x4"}));
  EXPECT_EQ(s.target_columns, (std::vector<std::size_t>{0}));
  for (const float v : s.values) ASSERT_TRUE(std::isfinite(v));
  validate(s);
  config.features = 1;
  const HostSeries one = make_synthetic_series(config);
  EXPECT_EQ(one.column_names, (std::vector<std::string>{"target"}));
}

TEST(SyntheticSeries, SameSeedSameBitsOtherSeedOtherSeries) {
  SyntheticSeriesConfig config;
  config.steps = 2000;
  config.seed = 7;
  const HostSeries a = make_synthetic_series(config), b = make_synthetic_series(config);
  ASSERT_EQ(a.values.size(), b.values.size());
  EXPECT_EQ(std::memcmp(a.values.data(), b.values.data(), a.values.size() * sizeof(float)), 0);
  config.seed = 8;
  const HostSeries c = make_synthetic_series(config);
  std::size_t differing = 0;
  for (std::size_t i = 0; i < a.values.size(); ++i) differing += a.values[i] != c.values[i];
  EXPECT_GT(differing, a.values.size() * 9 / 10) << "seed 8 reproduces seed 7's series";
}

// Least squares in double by the normal equations (Gaussian elimination with partial pivoting).
std::vector<double> least_squares(const std::vector<std::vector<double>>& rows,
                                  const std::vector<double>& y) {
  const std::size_t n = rows.front().size();
  std::vector<std::vector<double>> a(n, std::vector<double>(n + 1, 0.0));
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) a[i][j] += rows[r][i] * rows[r][j];
      a[i][n] += rows[r][i] * y[r];
    }
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t pivot = c;
    for (std::size_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[pivot][c])) pivot = r;
    std::swap(a[c], a[pivot]);
    for (std::size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (std::size_t j = c; j <= n; ++j) a[r][j] -= f * a[c][j];
    }
  }
  std::vector<double> w(n);
  for (std::size_t i = 0; i < n; ++i) w[i] = a[i][n] / a[i][i];
  return w;
}

// A linear predictor fitted on the first half (the target's last three values, the lead column,
// the season's phase) beats the last value on the second half by a wide margin: the series has
// structure a model can learn. The no-lead control shows the lead column carries information.
TEST(SyntheticSeries, TargetIsPredictableBeyondItsLastValue) {
  SyntheticSeriesConfig config;
  config.steps = 20000;
  config.seed = 3;
  const HostSeries s = make_synthetic_series(config);
  const std::size_t C = s.columns, T = s.steps, P = config.season_period;
  const auto at = [&](std::size_t t, std::size_t c) {
    return static_cast<double>(s.values[t * C + c]);
  };
  const auto mse_of = [&](bool with_lead) {
    std::vector<std::vector<double>> rows;
    std::vector<double> y;
    for (std::size_t t = 2; t + 1 < T / 2; ++t) {
      const double phase =
          2.0 * std::numbers::pi * static_cast<double>(t % P) / static_cast<double>(P);
      std::vector<double> row = {at(t, 0),        at(t - 1, 0),    at(t - 2, 0),
                                 std::sin(phase), std::cos(phase), 1.0};
      if (with_lead) row.push_back(at(t, 1));
      rows.push_back(row);
      y.push_back(at(t + 1, 0));
    }
    const std::vector<double> w = least_squares(rows, y);
    double model = 0.0, last = 0.0;
    std::size_t n = 0;
    for (std::size_t t = T / 2; t + 1 < T; ++t, ++n) {
      const double phase =
          2.0 * std::numbers::pi * static_cast<double>(t % P) / static_cast<double>(P);
      std::vector<double> row = {at(t, 0),        at(t - 1, 0),    at(t - 2, 0),
                                 std::sin(phase), std::cos(phase), 1.0};
      if (with_lead) row.push_back(at(t, 1));
      double prediction = 0.0;
      for (std::size_t i = 0; i < row.size(); ++i) prediction += w[i] * row[i];
      model += (prediction - at(t + 1, 0)) * (prediction - at(t + 1, 0));
      last += (at(t, 0) - at(t + 1, 0)) * (at(t, 0) - at(t + 1, 0));
    }
    return std::pair<double, double>{model / static_cast<double>(n), last / static_cast<double>(n)};
  };
  const auto [with_lead, last_value] = mse_of(true);
  const auto [without_lead, unused] = mse_of(false);
  std::printf("held-out MSE: last value %.4f, linear AR + season %.4f, + lead %.4f\n", last_value,
              without_lead, with_lead);
  EXPECT_LT(without_lead, 0.8 * last_value) << "the AR(2) + season structure is not learnable";
  EXPECT_LT(with_lead, 0.8 * without_lead) << "the lead column carries no information";
}

TEST(SyntheticSeries, InvalidConfigNamesEveryField) {
  SyntheticSeriesConfig config;
  config.steps = 0;
  config.features = 0;
  config.season_period = 1;
  config.season_amplitude = -1.0;
  config.calm_ar1 = 1.5;
  config.calm_ar2 = 0.0;  // a1 + a2 = 1.5: explosive
  config.innovation_std = 0.0;
  config.volatile_multiplier = 0.5;
  config.regime_persistence = 1.5;
  config.lead_strength = -0.1;
  config.feature_loading = std::nan("");
  config.observation_noise = -1.0;
  std::string name;
  const std::string what = error_text([&] { make_synthetic_series(config); }, &name);
  EXPECT_EQ(name, "invalid SyntheticSeriesConfig");
  for (const char* part :
       {"steps = 0", "features = 0", "season_period = 1, allowed >= 2",
        "season_amplitude = -1, allowed [0, inf), finite", "calm_ar1 = 1.5, calm_ar2 = 0",
        "innovation_std = 0, allowed (0, inf), finite",
        "volatile_multiplier = 0.5, allowed [1, inf), finite",
        "regime_persistence = 1.5, allowed [0, 1]", "lead_strength = -0.10000000000000001",
        "feature_loading = nan, allowed [0, 1]", "observation_noise = -1"})
    expect_contains(what, part);
}

// ---------------------------------------------------------------------------------------------
// Split

// Property over many random configurations: when the split succeeds, every training window's
// inputs and targets lie in [0, train_rows), every training target row is < every validation
// window's first row, validation windows stay inside the series, and both counts are maximal;
// when it fails, the error is the one its sizes call for.
TEST(SeriesSplit, NoLeakageOverManyConfigurations) {
  std::mt19937_64 rng(2024);
  std::size_t succeeded = 0, failed = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const std::size_t T = 1 + rng() % 400;
    const std::size_t L = 1 + rng() % 80;
    const std::size_t h = 1 + rng() % 8;
    const double f = (1.0 + static_cast<double>(rng() % 998)) / 1000.0;  // (0, 1)
    const std::size_t expected_train_rows =
        static_cast<std::size_t>(std::floor((1.0 - f) * static_cast<double>(T)));
    SeriesSplit s;
    std::string name;
    const std::string what = error_text([&] { s = split_series(T, L, h, f); }, &name);
    const std::string config = "T " + std::to_string(T) + ", L " + std::to_string(L) + ", h " +
                               std::to_string(h) + ", f " + std::to_string(f);
    if (what != "(no throw)") {
      ++failed;
      if (L + h > T)
        ASSERT_EQ(name, "window longer than the series") << config;
      else if (expected_train_rows < L + h)
        ASSERT_EQ(name, "no training window") << config;
      else
        ASSERT_EQ(name, "no validation window") << config;
      continue;
    }
    ++succeeded;
    ASSERT_EQ(s.train_rows, expected_train_rows) << config;
    ASSERT_GE(s.train_windows, 1u) << config;
    ASSERT_GE(s.validation_windows, 1u) << config;
    ASSERT_EQ(s.validation_first, s.train_rows) << config;
    const std::size_t last_train_target = (s.train_windows - 1) + L + h - 1;
    ASSERT_LT(last_train_target, s.train_rows) << config;        // inside the training range
    ASSERT_LT(last_train_target, s.validation_first) << config;  // before every validation start
    ASSERT_GE(s.train_windows + L + h - 1, s.train_rows) << config;  // one more would leave it
    const std::size_t last_validation_row =
        s.validation_first + s.validation_windows - 1 + L + h - 1;
    ASSERT_EQ(last_validation_row, T - 1) << config;  // the last window ends at the last row
  }
  std::printf("%zu splits checked, %zu rejected\n", succeeded, failed);
  EXPECT_GT(succeeded, 1000u);
  EXPECT_GT(failed, 1000u);
}

TEST(SeriesSplit, ErrorsNameTheValueAndTheLimit) {
  std::string name;
  std::string what = error_text([] { split_series(50, 48, 3, 0.2); }, &name);
  EXPECT_EQ(name, "window longer than the series");
  expect_contains(what, "window + horizon = 48 + 3 = 51 rows, the series has 50 rows");
  what = error_text([] { split_series(100, 10, 1, 0.95); }, &name);
  EXPECT_EQ(name, "no training window");
  expect_contains(what, "the training range has 5 rows");
  expect_contains(what, "window + horizon = 11");
  what = error_text([] { split_series(100, 10, 1, 0.05); }, &name);
  EXPECT_EQ(name, "no validation window");
  expect_contains(what, "the validation range has 5 rows");
  what = error_text([] { split_series(100, 10, 1, 1.0); }, &name);
  expect_contains(what, "validation_fraction = 1, allowed (0, 1)");
  what = error_text([] { split_series(100, 0, 1, 0.2); }, &name);
  expect_contains(what, "window = 0");
  const SeriesSplit ok = split_series(100, 10, 2, 0.25);
  EXPECT_EQ(ok.train_rows, 75u);
  EXPECT_EQ(ok.train_windows, 64u);
  EXPECT_EQ(ok.validation_first, 75u);
  EXPECT_EQ(ok.validation_windows, 14u);
}

// ---------------------------------------------------------------------------------------------
// CSV

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

TEST(CsvSeries, ColumnsAreInputsThenExtraTargets) {
  const test::TempDir dir("csv_series");
  const auto path = dir / "data.csv";
  write_file(path,
             "date,open,close,volume,signal\n"
             "d0,1,10,100,0.5\n"
             "d1,2,11,200,-0.5\n"
             "d2,3,12,300,0.25\n"
             "d3,4,13,400,0.0\n");
  CsvSeriesOptions options;
  options.path = path.string();
  options.target_columns = {"signal"};
  options.feature_columns = {"close", "volume"};
  const HostSeries s = load_csv_series(options);
  EXPECT_EQ(s.steps, 3u);  // the loader keeps the last row's price only
  EXPECT_EQ(s.column_names, (std::vector<std::string>{"close", "volume", "signal"}));
  EXPECT_EQ(s.input_columns, 2u);
  EXPECT_EQ(s.target_columns, (std::vector<std::size_t>{2}));
  EXPECT_EQ(s.values, (std::vector<float>{10, 100, 0.5f, 11, 200, -0.5f, 12, 300, 0.25f}));

  options.feature_columns.clear();  // all but the date: the target is an input too
  options.target_columns = {"close"};
  const HostSeries all = load_csv_series(options);
  EXPECT_EQ(all.column_names, (std::vector<std::string>{"open", "close", "volume", "signal"}));
  EXPECT_EQ(all.input_columns, 4u);
  EXPECT_EQ(all.target_columns, (std::vector<std::size_t>{1}));
}

TEST(CsvSeries, ErrorsNameFileLineAndColumn) {
  const test::TempDir dir("csv_series");
  const auto path = dir / "data.csv";
  write_file(path, "\ndate,close,volume\nd0,10,100\nd1,11,abc\nd2,12,300\n");
  CsvSeriesOptions options;
  options.path = path.string();
  options.target_columns = {"price"};
  std::string name;
  std::string what = error_text([&] { load_csv_series(options); }, &name);
  EXPECT_EQ(name, "target column missing");
  expect_contains(what, path.string() +
                            ":2: no column named \"price\" (target_columns); "
                            "columns: date, close, volume");
  options.target_columns = {"close"};
  options.feature_columns = {"volume", "bid"};
  what = error_text([&] { load_csv_series(options); }, &name);
  EXPECT_EQ(name, "feature column missing");
  expect_contains(what, ":2: no column named \"bid\" (feature_columns)");
  options.feature_columns = {"volume"};
  what = error_text([&] { load_csv_series(options); }, &name);  // the loader's own error
  EXPECT_EQ(name, "non-numeric value");
  expect_contains(what, path.string() + ":4:3 (column \"volume\")");
  options.target_columns = {};
  what = error_text([&] { load_csv_series(options); }, &name);
  expect_contains(what, "no target column");
  options.target_columns = {"close", "close"};
  what = error_text([&] { load_csv_series(options); }, &name);
  expect_contains(what, "target_columns names \"close\" twice");
  options.path = (dir / "missing.csv").string();
  options.target_columns = {"close"};
  what = error_text([&] { load_csv_series(options); }, &name);
  EXPECT_EQ(name, "cannot open file");
}

TEST(HostSeries, ValidateNamesTheInconsistency) {
  HostSeries s;
  s.steps = 2;
  s.columns = 2;
  s.column_names = {"a", "b"};
  s.values = {1, 2, 3, 4};
  s.input_columns = 2;
  s.target_columns = {2};
  expect_contains(error_text([&] { validate(s); }), "target column index 2, allowed [0, 1]");
  s.target_columns = {1};
  s.values.pop_back();
  expect_contains(error_text([&] { validate(s); }), "3 values for 2 steps x 2 columns");
}

}  // namespace
