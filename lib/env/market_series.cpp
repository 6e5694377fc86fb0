#include "lib/env/market_series.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numbers>
#include <random>
#include <sstream>
#include <system_error>
#include <utility>

#include "kernels/core/error.h"

namespace resident {

namespace {

// Shortest decimal text that reads back as `value` ("nan", "inf", "-inf" for non-finite).
std::string number_text(double value) {
  char text[64];
  const auto result = std::to_chars(text, text + sizeof(text), value);
  if (result.ec != std::errc{}) return "?";
  return std::string(text, result.ptr);
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) {
    if (!text.empty()) text += ", ";
    text += name;
  }
  return text;
}

}  // namespace

std::size_t MarketSeries::feature_index(std::string_view name) const {
  const auto found = std::find(feature_names.begin(), feature_names.end(), name);
  if (found != feature_names.end()) return static_cast<std::size_t>(found - feature_names.begin());
  throw Error("MarketSeries::feature_index", "unknown feature",
              "no feature named \"" + std::string(name) + "\"; features: " + joined(feature_names),
              __FILE__, __LINE__);
}

// ---------------------------------------------------------------------------------------------
// CSV

namespace {

[[noreturn]] void throw_csv_error(const char* error_name, const std::string& detail,
                                  int source_line) {
  throw Error("load_market_csv", error_name, detail, __FILE__, source_line);
}

// "<path>:<line>"
std::string place(const std::string& path, std::size_t line) {
  return path + ":" + std::to_string(line);
}

// "<path>:<line>:<column> (column "<name>")"
std::string place(const std::string& path, std::size_t line, std::size_t column,
                  const std::string& column_name) {
  return place(path, line) + ":" + std::to_string(column) + " (column \"" + column_name + "\")";
}

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = line.find(',', begin);
    if (comma == std::string_view::npos) {
      fields.push_back(trimmed(line.substr(begin)));
      return fields;
    }
    fields.push_back(trimmed(line.substr(begin, comma - begin)));
    begin = comma + 1;
  }
}

struct CsvLine {
  std::size_t number = 0;  // 1-based physical line number
  std::string_view text;   // without the line ending
};

// The non-blank lines of `contents`, "\r\n" or "\n" terminated.
std::vector<CsvLine> non_blank_lines(std::string_view contents) {
  std::vector<CsvLine> lines;
  std::size_t number = 0;
  std::size_t begin = 0;
  while (begin < contents.size()) {
    ++number;
    std::size_t end = contents.find('\n', begin);
    if (end == std::string_view::npos) end = contents.size();
    std::string_view text = contents.substr(begin, end - begin);
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (!trimmed(text).empty()) lines.push_back({number, text});
    begin = end + 1;
  }
  return lines;
}

std::string read_file(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored))
    throw_csv_error("cannot open file", path + ": " + std::strerror(EISDIR), __LINE__);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_csv_error("cannot open file", path + ": " + std::strerror(errno), __LINE__);
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) throw_csv_error("cannot open file", path + ": read failed", __LINE__);
  return std::move(contents).str();
}

enum class NumberStatus { Ok, NotANumber, NotFinite, OutOfRange };

// A decimal number filling all of `text` (an optional leading '+' allowed).
NumberStatus parse_number(std::string_view text, double* value) {
  if (!text.empty() && text.front() == '+') {
    text.remove_prefix(1);
    if (!text.empty() && text.front() == '-') return NumberStatus::NotANumber;
  }
  if (text.empty()) return NumberStatus::NotANumber;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, *value);
  if (ptr != end) return NumberStatus::NotANumber;
  if (ec == std::errc::result_out_of_range) return NumberStatus::OutOfRange;
  if (ec != std::errc{}) return NumberStatus::NotANumber;
  return std::isfinite(*value) ? NumberStatus::Ok : NumberStatus::NotFinite;
}

// The column index of `name` in `header`, or a "bad header" error naming the option.
std::size_t column_of(const std::vector<std::string>& header, const std::string& name,
                      const char* option, const std::string& path, std::size_t header_line) {
  const auto found = std::find(header.begin(), header.end(), name);
  if (found == header.end())
    throw_csv_error("bad header",
                    place(path, header_line) + ": no column named \"" + name + "\" (" + option +
                        "); columns: " + joined(header),
                    __LINE__);
  return static_cast<std::size_t>(found - header.begin());
}

}  // namespace

MarketSeries load_market_csv(const std::string& path, const MarketCsvOptions& options) {
  const std::string contents = read_file(path);
  const std::vector<CsvLine> lines = non_blank_lines(contents);
  if (lines.empty())
    throw_csv_error("empty file", path + ": no header line (the file has no non-blank line)",
                    __LINE__);

  // Header.
  const std::size_t header_line = lines.front().number;
  std::vector<std::string> header;
  for (const std::string_view name : split_fields(lines.front().text)) {
    const std::size_t column = header.size() + 1;
    if (name.empty())
      throw_csv_error(
          "bad header",
          place(path, header_line) + ":" + std::to_string(column) + ": empty column name",
          __LINE__);
    const auto earlier = std::find(header.begin(), header.end(), name);
    if (earlier != header.end())
      throw_csv_error("bad header",
                      place(path, header_line) + ":" + std::to_string(column) +
                          ": duplicate column name \"" + std::string(name) + "\" (also column " +
                          std::to_string(earlier - header.begin() + 1) + ")",
                      __LINE__);
    header.emplace_back(name);
  }
  const std::size_t price_column =
      column_of(header, options.price_column, "price_column", path, header_line);
  std::vector<std::size_t> feature_columns;
  if (options.feature_columns.empty()) {
    for (std::size_t c = 0; c < header.size(); ++c)
      if (options.date_column.empty() || header[c] != options.date_column)
        feature_columns.push_back(c);
  } else {
    for (const std::string& name : options.feature_columns)
      feature_columns.push_back(column_of(header, name, "feature_columns", path, header_line));
  }

  // Data rows: prices in double, features as float.
  const std::size_t feature_count = feature_columns.size();
  std::vector<double> prices;
  std::vector<float> features;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const CsvLine& line = lines[i];
    const std::vector<std::string_view> fields = split_fields(line.text);
    if (fields.size() < header.size())
      throw_csv_error("wrong number of fields",
                      place(path, line.number, fields.size() + 1, header[fields.size()]) +
                          ": missing field; the header has " + std::to_string(header.size()) +
                          " fields, this row " + std::to_string(fields.size()),
                      __LINE__);
    if (fields.size() > header.size())
      throw_csv_error("wrong number of fields",
                      place(path, line.number) + ":" + std::to_string(header.size() + 1) +
                          ": extra field; the header has " + std::to_string(header.size()) +
                          " fields, this row " + std::to_string(fields.size()),
                      __LINE__);

    // The value of column c, or an error naming line, column and value.
    const auto value_of = [&](std::size_t c) {
      const std::string where = place(path, line.number, c + 1, header[c]);
      const std::string quoted = "\"" + std::string(fields[c]) + "\"";
      double value = 0.0;
      switch (parse_number(fields[c], &value)) {
        case NumberStatus::Ok:
          return value;
        case NumberStatus::NotANumber:
          throw_csv_error(
              "non-numeric value",
              where + (fields[c].empty() ? ": empty field" : ": " + quoted + " is not a number"),
              __LINE__);
        case NumberStatus::NotFinite:
          throw_csv_error("non-finite value", where + ": " + quoted + " is not finite", __LINE__);
        case NumberStatus::OutOfRange:
          break;
      }
      throw_csv_error("non-finite value", where + ": " + quoted + " is outside the range of double",
                      __LINE__);
    };

    const double price = value_of(price_column);
    if (!(price > 0.0))
      throw_csv_error("non-positive price",
                      place(path, line.number, price_column + 1, header[price_column]) +
                          ": price \"" + std::string(fields[price_column]) + "\" is not > 0",
                      __LINE__);
    prices.push_back(price);
    for (const std::size_t c : feature_columns) {
      const double value = value_of(c);
      if (std::fabs(value) > static_cast<double>(std::numeric_limits<float>::max()))
        throw_csv_error("non-finite value",
                        place(path, line.number, c + 1, header[c]) + ": \"" +
                            std::string(fields[c]) + "\" is outside the range of float",
                        __LINE__);
      features.push_back(static_cast<float>(value));
    }
  }

  const std::size_t rows = prices.size();
  const std::size_t required_rows = std::max<std::size_t>(options.min_rows, 2);
  if (rows < required_rows)
    throw_csv_error("too few rows",
                    place(path, lines.back().number) + ": " + std::to_string(rows) +
                        " data rows, at least " + std::to_string(required_rows) +
                        " needed (min_rows = " + std::to_string(options.min_rows) + ")",
                    __LINE__);

  MarketSeries series;
  series.steps = rows - 1;
  series.feature_count = feature_count;
  for (const std::size_t c : feature_columns) series.feature_names.push_back(header[c]);
  features.resize(series.steps * feature_count);  // the last row contributes only its price
  series.features = std::move(features);
  series.next_returns.resize(series.steps);
  for (std::size_t t = 0; t < series.steps; ++t) {
    const double ratio = prices[t + 1] / prices[t];
    const double r = options.returns == ReturnKind::Log ? std::log(ratio) : ratio - 1.0;
    series.next_returns[t] = static_cast<float>(r);
  }
  return series;
}

// ---------------------------------------------------------------------------------------------
// Synthetic market

namespace {

void append_problem(std::string& problems, const std::string& problem) {
  if (!problems.empty()) problems += "; ";
  problems += problem;
}

// value in [lower, upper] (or [lower, upper) when upper_open), finite.
void check_real(std::string& problems, const char* field, double value, double lower, double upper,
                bool upper_open) {
  const bool below_upper = upper_open ? value < upper : value <= upper;
  if (std::isfinite(value) && value >= lower && below_upper) return;
  std::string range = "[" + number_text(lower) + ", ";
  range += std::isinf(upper) ? "inf), finite" : number_text(upper) + (upper_open ? ")" : "]");
  append_problem(problems, std::string(field) + " = " + number_text(value) + ", allowed " + range);
}

// The draws of make_synthetic_market (see the header): uniforms from the top 53 bits of a
// mt19937_64 draw, normals from Box-Muller's cosine branch.
class SyntheticRandom {
 public:
  explicit SyntheticRandom(std::uint64_t seed) : engine_(seed) {}

  // In [0, 1), a multiple of 2^-53.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

  // N(0, 1) from two uniforms; 1 - u lies in (0, 1], so the logarithm is finite.
  double normal() {
    const double radius_uniform = 1.0 - uniform();
    const double angle_uniform = uniform();
    return std::sqrt(-2.0 * std::log(radius_uniform)) *
           std::cos(2.0 * std::numbers::pi * angle_uniform);
  }

  // Uniform over {0, ..., count - 1}, count >= 1.
  std::size_t index(std::size_t count) {
    const auto drawn = static_cast<std::size_t>(uniform() * static_cast<double>(count));
    return std::min(drawn, count - 1);
  }

 private:
  std::mt19937_64 engine_;
};

MarketRegime next_regime(SyntheticRandom& random, MarketRegime current, double persistence) {
  if (random.uniform() < persistence) return current;
  // One of the other regimes: index k among them, skipping the current one.
  const std::size_t k = random.index(kMarketRegimeCount - 1);
  const auto current_index = static_cast<std::size_t>(current);
  return static_cast<MarketRegime>(k < current_index ? k : k + 1);
}

}  // namespace

void validate(const SyntheticMarketConfig& config) {
  std::string problems;
  if (config.steps < 1) append_problem(problems, "steps = 0, allowed >= 1");
  const double inf = std::numeric_limits<double>::infinity();
  check_real(problems, "signal_strength", config.signal_strength, 0.0, 1.0, false);
  check_real(problems, "regime_persistence", config.regime_persistence, 0.0, 1.0, false);
  if (!(config.volatility > 0.0) || !std::isfinite(config.volatility))
    append_problem(problems,
                   "volatility = " + number_text(config.volatility) + ", allowed (0, inf), finite");
  check_real(problems, "trend_drift", config.trend_drift, 0.0, inf, false);
  check_real(problems, "mean_reversion", config.mean_reversion, 0.0, 1.0, true);
  check_real(problems, "high_volatility_multiplier", config.high_volatility_multiplier, 1.0, inf,
             false);
  check_real(problems, "noise_autocorrelation", config.noise_autocorrelation, 0.0, 1.0, true);
  if (!problems.empty())
    throw Error("validate(SyntheticMarketConfig)", "invalid SyntheticMarketConfig", problems,
                __FILE__, __LINE__);
}

SyntheticMarket make_synthetic_market(const SyntheticMarketConfig& config) {
  validate(config);
  const std::size_t steps = config.steps;
  const std::size_t feature_count = kSyntheticFirstNoiseFeature + config.noise_feature_count;

  SyntheticMarket market;
  MarketSeries& series = market.series;
  series.steps = steps;
  series.feature_count = feature_count;
  series.feature_names = {"signal", "previous_return"};
  for (std::size_t k = 0; k < config.noise_feature_count; ++k)
    series.feature_names.push_back("noise_" + std::to_string(k));
  series.features.resize(steps * feature_count);
  series.next_returns.resize(steps);
  market.regimes.resize(steps);

  SyntheticRandom random(config.seed);
  const double hit_probability = (1.0 + config.signal_strength) / 2.0;
  const double a = config.noise_autocorrelation;
  const double innovation_scale = std::sqrt(1.0 - a * a);
  std::vector<double> noise(config.noise_feature_count);
  MarketRegime regime = MarketRegime::TrendingUp;
  double previous_return = 0.0;  // r_t
  for (std::size_t t = 0; t < steps; ++t) {
    // 1. Regime.
    regime = t == 0 ? static_cast<MarketRegime>(random.index(kMarketRegimeCount))
                    : next_regime(random, regime, config.regime_persistence);
    market.regimes[t] = regime;

    // 2. The next return.
    const double e = random.normal();
    double next_return = 0.0;
    switch (regime) {
      case MarketRegime::TrendingUp:
        next_return = config.trend_drift + config.volatility * e;
        break;
      case MarketRegime::TrendingDown:
        next_return = -config.trend_drift + config.volatility * e;
        break;
      case MarketRegime::MeanReverting:
        next_return = -config.mean_reversion * previous_return + config.volatility * e;
        break;
      case MarketRegime::HighVolatility:
        next_return = config.high_volatility_multiplier * config.volatility * e;
        break;
    }
    const auto stored_return = static_cast<float>(next_return);

    // 3. The signal: the sign of the stored next return with probability hit_probability.
    const double return_sign = stored_return >= 0.0f ? 1.0 : -1.0;
    const double signal_sign = random.uniform() < hit_probability ? return_sign : -return_sign;
    const double signal = signal_sign * std::fabs(random.normal());

    // 4. Noise features.
    for (double& n : noise) {
      const double innovation = random.normal();
      n = t == 0 ? innovation : a * n + innovation_scale * innovation;
    }

    float* row = &series.features[t * feature_count];
    row[kSyntheticSignalFeature] = static_cast<float>(signal);
    row[kSyntheticPreviousReturnFeature] = static_cast<float>(previous_return);
    for (std::size_t k = 0; k < noise.size(); ++k)
      row[kSyntheticFirstNoiseFeature + k] = static_cast<float>(noise[k]);
    series.next_returns[t] = stored_return;
    previous_return = next_return;
  }
  return market;
}

// ---------------------------------------------------------------------------------------------
// Feature normalization

namespace {

void validate(const FeatureNormalizationOptions& options) {
  std::string problems;
  if (options.kind != FeatureNormalization::Global && options.kind != FeatureNormalization::Rolling)
    append_problem(problems, "kind = " + std::to_string(static_cast<int>(options.kind)) +
                                 ", allowed Global or Rolling");
  if (options.kind == FeatureNormalization::Rolling && options.rolling_window < 1)
    append_problem(problems, "rolling_window = 0, allowed >= 1 for Rolling");
  if (!(options.epsilon > 0.0) || !std::isfinite(options.epsilon))
    append_problem(problems,
                   "epsilon = " + number_text(options.epsilon) + ", allowed (0, inf), finite");
  if (!problems.empty())
    throw Error("normalize_features", "invalid FeatureNormalizationOptions", problems, __FILE__,
                __LINE__);
}

// Column f of a [T, F] row-major matrix, in double.
std::vector<double> column(const MarketSeries& series, std::size_t f) {
  std::vector<double> values(series.steps);
  for (std::size_t t = 0; t < series.steps; ++t)
    values[t] = static_cast<double>(series.features[t * series.feature_count + f]);
  return values;
}

double mean_of(const std::vector<double>& values) {
  double sum = 0.0;
  for (const double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

}  // namespace

std::vector<float> normalize_features(const MarketSeries& series,
                                      const FeatureNormalizationOptions& options) {
  validate(options);
  const std::size_t steps = series.steps;
  const std::size_t feature_count = series.feature_count;
  std::vector<float> normalized(steps * feature_count);
  if (steps == 0) return normalized;
  const auto store = [&](std::size_t t, std::size_t f, double z) {
    normalized[t * feature_count + f] = static_cast<float>(z);
  };

  for (std::size_t f = 0; f < feature_count; ++f) {
    const std::vector<double> x = column(series, f);
    if (options.kind == FeatureNormalization::Global) {
      const double mean = mean_of(x);
      double squares = 0.0;
      for (const double v : x) squares += (v - mean) * (v - mean);
      const double scale = std::sqrt(squares / static_cast<double>(steps) + options.epsilon);
      for (std::size_t t = 0; t < steps; ++t) store(t, f, (x[t] - mean) / scale);
      continue;
    }

    // Rolling: the sums over the window of d = x - shift and d^2, updated by one row in and one
    // row out per step. Every `window` steps the shift becomes the newest value and the sums are
    // recomputed exactly: rounding does not accumulate, the shift stays near the window's values
    // (little cancellation in the variance), and row t reads rows <= t only, so the result is
    // causal bit for bit.
    const std::size_t window = options.rolling_window;
    double shift = 0.0;
    double shifted_sum = 0.0;
    double shifted_squares = 0.0;
    for (std::size_t t = 0; t < steps; ++t) {
      const std::size_t first = t + 1 >= window ? t + 1 - window : 0;
      if (t % window == 0) {
        shift = x[t];
        shifted_sum = 0.0;
        shifted_squares = 0.0;
        for (std::size_t i = first; i <= t; ++i) {
          shifted_sum += x[i] - shift;
          shifted_squares += (x[i] - shift) * (x[i] - shift);
        }
      } else {
        shifted_sum += x[t] - shift;
        shifted_squares += (x[t] - shift) * (x[t] - shift);
        if (first > 0) {
          const double leaving = x[first - 1] - shift;
          shifted_sum -= leaving;
          shifted_squares -= leaving * leaving;
        }
      }
      const auto count = static_cast<double>(t - first + 1);
      const double shifted_mean = shifted_sum / count;
      const double variance = std::max(shifted_squares / count - shifted_mean * shifted_mean, 0.0);
      store(t, f, (x[t] - shift - shifted_mean) / std::sqrt(variance + options.epsilon));
    }
  }
  return normalized;
}

}  // namespace resident
