#include "lib/data/series_source.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <numbers>
#include <random>
#include <sstream>
#include <string_view>

#include "kernels/core/error.h"
#include "lib/env/market_series.h"

namespace resident::data {

namespace {

std::string number_text(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

void append_problem(std::string& problems, const std::string& problem) {
  if (!problems.empty()) problems += "; ";
  problems += problem;
}

// value in [lower, upper] (upper may be +inf: then finite), else a problem naming the field.
void check_real(std::string& problems, const char* field, double value, double lower,
                double upper) {
  if (std::isfinite(value) && value >= lower && value <= upper) return;
  const std::string range = "[" + number_text(lower) + ", " +
                            (std::isinf(upper) ? "inf), finite" : number_text(upper) + "]");
  append_problem(problems, std::string(field) + " = " + number_text(value) + ", allowed " + range);
}

void check_stationary(std::string& problems, const char* a1_field, double a1,
                      const char* a2_field, double a2) {
  if (std::isfinite(a1) && std::isfinite(a2) && std::fabs(a2) < 1.0 && a2 + a1 < 1.0 &&
      a2 - a1 < 1.0)
    return;
  append_problem(problems, std::string(a1_field) + " = " + number_text(a1) + ", " + a2_field +
                               " = " + number_text(a2) +
                               ", allowed a stationary AR(2): |a2| < 1, a2 + a1 < 1, a2 - a1 < 1");
}

// The draws of make_synthetic_series (see the header).
class SeriesRandom {
 public:
  explicit SeriesRandom(std::uint64_t seed) : engine_(seed) {}
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  double normal() {
    const double radius_uniform = 1.0 - uniform();  // in (0, 1]: the logarithm is finite
    const double angle_uniform = uniform();
    return std::sqrt(-2.0 * std::log(radius_uniform)) *
           std::cos(2.0 * std::numbers::pi * angle_uniform);
  }

 private:
  std::mt19937_64 engine_;
};

[[noreturn]] void fail(const char* call, const char* error_name, const std::string& detail,
                       int line) {
  throw Error(call, error_name, detail, __FILE__, line);
}

// The header of a CSV file as load_market_csv reads it: the first non-blank line, split at
// commas, fields trimmed of spaces and tabs. Returns false (and leaves the errors to the loader)
// when the file cannot be read or has no non-blank line.
bool read_csv_header(const std::string& path, std::vector<std::string>* header,
                     std::size_t* line_number) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::string_view rest = line;
    while (true) {
      const std::size_t comma = rest.find(',');
      std::string_view field = rest.substr(0, comma);
      const std::size_t first = field.find_first_not_of(" \t");
      const std::size_t last = field.find_last_not_of(" \t");
      header->emplace_back(first == std::string_view::npos
                               ? std::string_view{}
                               : field.substr(first, last - first + 1));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    *line_number = number;
    return true;
  }
  return false;
}

}  // namespace

void validate(const HostSeries& s) {
  const auto bad = [](const std::string& detail, int line) {
    fail("validate(HostSeries)", "invalid series", detail, line);
  };
  if (s.steps == 0 || s.columns == 0)
    bad("steps = " + std::to_string(s.steps) + ", columns = " + std::to_string(s.columns) +
            ", both must be >= 1",
        __LINE__);
  if (s.values.size() != s.steps * s.columns)
    bad(std::to_string(s.values.size()) + " values for " + std::to_string(s.steps) + " steps x " +
            std::to_string(s.columns) + " columns",
        __LINE__);
  if (s.column_names.size() != s.columns)
    bad(std::to_string(s.column_names.size()) + " column names for " +
            std::to_string(s.columns) + " columns",
        __LINE__);
  if (s.input_columns == 0 || s.input_columns > s.columns)
    bad("input_columns = " + std::to_string(s.input_columns) + ", allowed [1, " +
            std::to_string(s.columns) + "]",
        __LINE__);
  if (s.target_columns.empty()) bad("no target column", __LINE__);
  for (const std::size_t c : s.target_columns)
    if (c >= s.columns)
      bad("target column index " + std::to_string(c) + ", allowed [0, " +
              std::to_string(s.columns - 1) + "]",
          __LINE__);
}

// ---------------------------------------------------------------------------------------------
// Synthetic

void validate(const SyntheticSeriesConfig& c) {
  std::string problems;
  const double inf = std::numeric_limits<double>::infinity();
  if (c.steps < 1) append_problem(problems, "steps = 0, allowed >= 1");
  if (c.features < 1) append_problem(problems, "features = 0, allowed >= 1");
  if (c.season_period < 2)
    append_problem(problems,
                   "season_period = " + std::to_string(c.season_period) + ", allowed >= 2");
  check_real(problems, "season_amplitude", c.season_amplitude, 0.0, inf);
  check_stationary(problems, "calm_ar1", c.calm_ar1, "calm_ar2", c.calm_ar2);
  check_stationary(problems, "volatile_ar1", c.volatile_ar1, "volatile_ar2", c.volatile_ar2);
  if (!(std::isfinite(c.innovation_std) && c.innovation_std > 0.0))
    append_problem(problems, "innovation_std = " + number_text(c.innovation_std) +
                                 ", allowed (0, inf), finite");
  check_real(problems, "volatile_multiplier", c.volatile_multiplier, 1.0, inf);
  check_real(problems, "regime_persistence", c.regime_persistence, 0.0, 1.0);
  check_real(problems, "lead_strength", c.lead_strength, 0.0, 1.0);
  check_real(problems, "feature_loading", c.feature_loading, 0.0, 1.0);
  check_real(problems, "observation_noise", c.observation_noise, 0.0, inf);
  if (!problems.empty())
    fail("validate(SyntheticSeriesConfig)", "invalid SyntheticSeriesConfig", problems, __LINE__);
}

HostSeries make_synthetic_series(const SyntheticSeriesConfig& c) {
  validate(c);
  const std::size_t T = c.steps, F = c.features;
  HostSeries series;
  series.steps = T;
  series.columns = F;
  series.input_columns = F;
  series.target_columns = {0};
  series.column_names.push_back("target");
  if (F >= 2) series.column_names.push_back("lead");
  for (std::size_t k = 2; k < F; ++k) series.column_names.push_back("x" + std::to_string(k));
  series.source = "synthetic(seed " + std::to_string(c.seed) + ", " + std::to_string(T) +
                  " steps, " + std::to_string(F) + " features)";
  series.values.resize(T * F);

  SeriesRandom random(c.seed);
  std::vector<double> shocks(T + 1);
  for (double& e : shocks) e = random.normal();

  const double lead_rest = std::sqrt(1.0 - c.lead_strength * c.lead_strength);
  constexpr double kNoiseAr = 0.9;
  const double noise_innovation = std::sqrt(1.0 - kNoiseAr * kNoiseAr);
  std::vector<double> loading(F, 0.0), loading_rest(F, 0.0), q(F, 0.0);
  for (std::size_t k = 2; k < F; ++k) {
    loading[k] = std::pow(c.feature_loading, static_cast<double>(k - 1));
    loading_rest[k] = std::sqrt(1.0 - loading[k] * loading[k]);
  }
  int regime = 0;
  double s1 = 0.0, s2 = 0.0;  // s_{t-1}, s_{t-2}
  for (std::size_t t = 0; t < T; ++t) {
    if (t > 0 && !(random.uniform() < c.regime_persistence)) regime = 1 - regime;
    const double a1 = regime == 0 ? c.calm_ar1 : c.volatile_ar1;
    const double a2 = regime == 0 ? c.calm_ar2 : c.volatile_ar2;
    const double sigma = regime == 0 ? c.innovation_std : c.innovation_std * c.volatile_multiplier;
    const double s = a1 * s1 + a2 * s2 + sigma * shocks[t];
    const double season =
        c.season_amplitude *
        std::sin(2.0 * std::numbers::pi * static_cast<double>(t % c.season_period) /
                 static_cast<double>(c.season_period));
    float* row = &series.values[t * F];
    row[0] = static_cast<float>(s + season + c.observation_noise * random.normal());
    if (F >= 2) row[1] = static_cast<float>(c.lead_strength * shocks[t + 1] +
                                            lead_rest * random.normal());
    for (std::size_t k = 2; k < F; ++k) {
      const double innovation = random.normal();
      q[k] = t == 0 ? innovation : kNoiseAr * q[k] + noise_innovation * innovation;
      row[k] = static_cast<float>(loading[k] * s + loading_rest[k] * q[k]);
    }
    s2 = s1;
    s1 = s;
  }
  return series;
}

// ---------------------------------------------------------------------------------------------
// CSV

HostSeries load_csv_series(const CsvSeriesOptions& options) {
  constexpr const char* kCall = "load_csv_series";
  if (options.target_columns.empty())
    fail(kCall, "invalid argument", "no target column (target_columns is empty), allowed >= 1",
         __LINE__);
  const auto check_unique = [&](const std::vector<std::string>& names, const char* field) {
    for (std::size_t i = 0; i < names.size(); ++i)
      for (std::size_t j = i + 1; j < names.size(); ++j)
        if (names[i] == names[j])
          fail(kCall, "invalid argument",
               std::string(field) + " names \"" + names[i] + "\" twice (positions " +
                   std::to_string(i + 1) + " and " + std::to_string(j + 1) + ")",
               __LINE__);
  };
  check_unique(options.target_columns, "target_columns");
  check_unique(options.feature_columns, "feature_columns");

  // Inputs and targets against the header first, so that a missing column is named as what it
  // is (the loader would call it a feature column); an unreadable file is left to the loader.
  std::vector<std::string> header;
  std::size_t header_line = 0;
  std::vector<std::string> inputs = options.feature_columns;
  if (read_csv_header(options.path, &header, &header_line)) {
    const auto in_header = [&](const std::string& name) {
      return std::find(header.begin(), header.end(), name) != header.end();
    };
    for (const std::string& name : options.target_columns)
      if (!in_header(name))
        fail(kCall, "target column missing",
             options.path + ":" + std::to_string(header_line) + ": no column named \"" + name +
                 "\" (target_columns); columns: " + joined(header),
             __LINE__);
    for (const std::string& name : options.feature_columns)
      if (!in_header(name))
        fail(kCall, "feature column missing",
             options.path + ":" + std::to_string(header_line) + ": no column named \"" + name +
                 "\" (feature_columns); columns: " + joined(header),
             __LINE__);
    if (inputs.empty())
      for (const std::string& name : header)
        if (options.date_column.empty() || name != options.date_column) inputs.push_back(name);
  }
  if (inputs.empty() && !header.empty())
    fail(kCall, "invalid argument",
         options.path + ": no input column (the file has only the date column)", __LINE__);

  MarketCsvOptions csv;
  csv.price_column = options.price_column;
  csv.date_column = options.date_column;
  csv.feature_columns = inputs;
  for (const std::string& name : options.target_columns)
    if (std::find(inputs.begin(), inputs.end(), name) == inputs.end())
      csv.feature_columns.push_back(name);
  MarketSeries market = load_market_csv(options.path, csv);

  HostSeries series;
  series.steps = market.steps;
  series.columns = market.feature_count;
  series.column_names = market.feature_names;
  series.values = std::move(market.features);
  series.input_columns = inputs.empty() ? market.feature_count : inputs.size();
  for (const std::string& name : options.target_columns)
    series.target_columns.push_back(market.feature_index(name));
  series.source = "csv " + options.path;
  validate(series);
  return series;
}

// ---------------------------------------------------------------------------------------------
// Split

SeriesSplit split_series(std::size_t steps, std::size_t window, std::size_t horizon,
                         double validation_fraction) {
  constexpr const char* kCall = "split_series";
  if (window == 0 || horizon == 0)
    fail(kCall, "invalid argument",
         "window = " + std::to_string(window) + ", horizon = " + std::to_string(horizon) +
             ", both must be >= 1",
         __LINE__);
  const std::size_t span = window + horizon;
  if (span > steps)
    fail(kCall, "window longer than the series",
         "window + horizon = " + std::to_string(window) + " + " + std::to_string(horizon) + " = " +
             std::to_string(span) + " rows, the series has " + std::to_string(steps) + " rows",
         __LINE__);
  if (!(std::isfinite(validation_fraction) && validation_fraction > 0.0 &&
        validation_fraction < 1.0))
    fail(kCall, "invalid argument",
         "validation_fraction = " + number_text(validation_fraction) + ", allowed (0, 1)",
         __LINE__);
  SeriesSplit split;
  split.train_rows = static_cast<std::size_t>(
      std::floor((1.0 - validation_fraction) * static_cast<double>(steps)));
  split.train_rows = std::min(split.train_rows, steps);
  if (split.train_rows < span)
    fail(kCall, "no training window",
         "the training range has " + std::to_string(split.train_rows) + " rows (" +
             number_text(1.0 - validation_fraction) + " of " + std::to_string(steps) +
             "), a window needs window + horizon = " + std::to_string(span) +
             "; lower validation_fraction = " + number_text(validation_fraction) +
             " or window/horizon",
         __LINE__);
  const std::size_t validation_rows = steps - split.train_rows;
  if (validation_rows < span)
    fail(kCall, "no validation window",
         "the validation range has " + std::to_string(validation_rows) + " rows (" +
             number_text(validation_fraction) + " of " + std::to_string(steps) +
             "), a window needs window + horizon = " + std::to_string(span) +
             "; raise validation_fraction or lower window/horizon",
         __LINE__);
  split.train_windows = split.train_rows - span + 1;
  split.validation_first = split.train_rows;
  split.validation_windows = validation_rows - span + 1;
  return split;
}

}  // namespace resident::data
