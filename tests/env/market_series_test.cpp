// MarketSeries from CSV (the happy path, and every error naming file, line and column with the
// exact message), the synthetic generator (determinism, regime persistence and the regimes'
// return laws, the signal's hit rate at the configured strength, noise features), and the
// global and rolling z-score normalization against a direct two-pass computation.
#include "lib/env/market_series.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"

namespace {

using resident::Error;
using resident::FeatureNormalization;
using resident::FeatureNormalizationOptions;
using resident::kMarketRegimeCount;
using resident::kSyntheticFirstNoiseFeature;
using resident::kSyntheticPreviousReturnFeature;
using resident::kSyntheticSignalFeature;
using resident::load_market_csv;
using resident::make_synthetic_market;
using resident::MarketCsvOptions;
using resident::MarketRegime;
using resident::MarketSeries;
using resident::normalize_features;
using resident::ReturnKind;
using resident::SyntheticMarket;
using resident::SyntheticMarketConfig;

// A directory of its own per test (ctest runs tests in parallel), removed afterwards.
class MarketCsv : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("resident_market_csv_" + std::to_string(::getpid()) + "_" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(directory_, ignored);
  }

  // Writes `contents` to a file of the test's directory and returns its path.
  std::string write(const std::string& name, const std::string& contents) const {
    const std::string path = (directory_ / name).string();
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }
  std::string directory() const { return directory_.string(); }

 private:
  std::filesystem::path directory_;
};

// load_market_csv(path, options) must throw an Error named `error_name` whose message is exactly
// "load_market_csv failed with <error_name> (<detail>) at lib/env/market_series.cpp:<line>".
void expect_csv_error(const std::string& path, const MarketCsvOptions& options,
                      const std::string& error_name, const std::string& detail) {
  try {
    load_market_csv(path, options);
    ADD_FAILURE() << "load_market_csv(" << path << ") did not throw; expected " << error_name;
  } catch (const Error& e) {
    EXPECT_EQ(e.call(), "load_market_csv");
    EXPECT_EQ(e.error_name(), error_name);
    EXPECT_EQ(e.file(), "lib/env/market_series.cpp");
    const std::string expected = "load_market_csv failed with " + error_name + " (" + detail +
                                 ") at " + e.file() + ":" + std::to_string(e.line());
    EXPECT_EQ(std::string(e.what()), expected);
  }
}

TEST_F(MarketCsv, ReadsPricesAndFeaturesWithDefaults) {
  // CRLF endings, a blank line, spaces around fields, a leading '+'.
  const std::string path = write("prices.csv",
                                 "date,open,close,volume\r\n"
                                 "2024-01-01, 10.0, 10.5, 1000\r\n"
                                 "\r\n"
                                 "2024-01-02,10.5,11.0,1200\r\n"
                                 "2024-01-03,11.0,+9.9,900\r\n");
  const MarketSeries series = load_market_csv(path);
  ASSERT_EQ(series.steps, 2u);  // three rows: the last contributes only its price
  ASSERT_EQ(series.feature_count, 3u);
  EXPECT_EQ(series.feature_names, (std::vector<std::string>{"open", "close", "volume"}));
  EXPECT_EQ(series.features, (std::vector<float>{10.0f, 10.5f, 1000.0f, 10.5f, 11.0f, 1200.0f}));
  ASSERT_EQ(series.next_returns.size(), 2u);
  EXPECT_EQ(series.next_returns[0], static_cast<float>(std::log(11.0 / 10.5)));
  EXPECT_EQ(series.next_returns[1], static_cast<float>(std::log(9.9 / 11.0)));
  EXPECT_EQ(series.feature_index("volume"), 2u);
}

TEST_F(MarketCsv, NamedFeatureColumnsSimpleReturnsAndTextColumns) {
  // The text column "ticker" is neither price nor feature: it is never parsed.
  const std::string path = write("prices.csv",
                                 "timestamp,ticker,px,volume,open\n"
                                 "1,ABC,100,5,99\n"
                                 "2,ABC,102,6,100\n"
                                 "3,ABC,96.9,7,101\n"
                                 "4,ABC,100.776,8,97\n");
  MarketCsvOptions options;
  options.price_column = "px";
  options.feature_columns = {"volume", "open"};
  options.returns = ReturnKind::Simple;
  options.min_rows = 4;
  const MarketSeries series = load_market_csv(path, options);
  ASSERT_EQ(series.steps, 3u);
  EXPECT_EQ(series.feature_names, (std::vector<std::string>{"volume", "open"}));
  EXPECT_EQ(series.features, (std::vector<float>{5, 99, 6, 100, 7, 101}));
  EXPECT_EQ(series.next_returns[0], static_cast<float>(102.0 / 100.0 - 1.0));
  EXPECT_EQ(series.next_returns[1], static_cast<float>(96.9 / 102.0 - 1.0));
  EXPECT_EQ(series.next_returns[2], static_cast<float>(100.776 / 96.9 - 1.0));
}

TEST_F(MarketCsv, FeatureIndexNamesTheKnownFeatures) {
  const MarketSeries series = load_market_csv(write("p.csv", "date,close\nd1,1\nd2,2\n"));
  try {
    series.feature_index("open");
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_name(), "unknown feature");
    EXPECT_NE(std::string(e.what()).find("no feature named \"open\"; features: close"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(MarketCsv, MissingOrUnreadableFile) {
  const std::string missing = directory() + "/missing.csv";
  expect_csv_error(missing, {}, "cannot open file", missing + ": No such file or directory");
  expect_csv_error(directory(), {}, "cannot open file", directory() + ": Is a directory");
}

TEST_F(MarketCsv, EmptyFile) {
  for (const std::string contents : {"", "\n\n", "  \t\r\n \n"}) {
    const std::string path = write("empty.csv", contents);
    expect_csv_error(path, {}, "empty file",
                     path + ": no header line (the file has no non-blank line)");
  }
}

// Each case: file contents, options, error name, and the message detail after "<path>".
struct ErrorCase {
  const char* what;
  std::string contents;
  std::function<void(MarketCsvOptions&)> set_options;
  std::string error_name;
  std::string detail_after_path;
};

TEST_F(MarketCsv, EveryErrorNamesFileLineAndColumn) {
  const auto defaults = [](MarketCsvOptions&) {};
  const std::string header = "date,open,close\n";
  const std::vector<ErrorCase> cases = {
      {"empty column name", "date,,close\nd,1,2\n", defaults, "bad header",
       ":1:2: empty column name"},
      {"duplicate column name", "date,close,close\nd,1,2\n", defaults, "bad header",
       ":1:3: duplicate column name \"close\" (also column 2)"},
      {"header after blank lines, no price column", "\n\ndate,open\nd,1\n", defaults, "bad header",
       ":3: no column named \"close\" (price_column); columns: date, open"},
      {"unknown feature column", header + "d,1,2\nd,1,2\n",
       [](MarketCsvOptions& o) {
         o.feature_columns = {"open", "volume"};
       },
       "bad header",
       ":1: no column named \"volume\" (feature_columns); columns: date, open, close"},
      {"missing field", header + "d,1,2\nd,1\n", defaults, "wrong number of fields",
       ":3:3 (column \"close\"): missing field; the header has 3 fields, this row 2"},
      {"extra field", header + "d,1,2\r\nd,1,2,3\r\n", defaults, "wrong number of fields",
       ":3:4: extra field; the header has 3 fields, this row 4"},
      {"text", header + "d,1,2\n\nd,1,abc\n", defaults, "non-numeric value",
       ":4:3 (column \"close\"): \"abc\" is not a number"},
      {"number followed by text", header + "d,1.5x,2\n", defaults, "non-numeric value",
       ":2:2 (column \"open\"): \"1.5x\" is not a number"},
      {"empty field", header + "d, ,2\n", defaults, "non-numeric value",
       ":2:2 (column \"open\"): empty field"},
      {"plus minus", header + "d,+-1,2\n", defaults, "non-numeric value",
       ":2:2 (column \"open\"): \"+-1\" is not a number"},
      {"date parsed when date_column is none", header + "2024-01-01,1,2\n",
       [](MarketCsvOptions& o) { o.date_column = ""; }, "non-numeric value",
       ":2:1 (column \"date\"): \"2024-01-01\" is not a number"},
      {"NaN", header + "d,1,2\nd,nan,2\n", defaults, "non-finite value",
       ":3:2 (column \"open\"): \"nan\" is not finite"},
      {"inf price", header + "d,1,inf\n", defaults, "non-finite value",
       ":2:3 (column \"close\"): \"inf\" is not finite"},
      {"-Infinity", header + "d,-Infinity,2\n", defaults, "non-finite value",
       ":2:2 (column \"open\"): \"-Infinity\" is not finite"},
      {"beyond double", header + "d,1e999,2\n", defaults, "non-finite value",
       ":2:2 (column \"open\"): \"1e999\" is outside the range of double"},
      {"beyond float (a feature)", header + "d,1e39,2\n", defaults, "non-finite value",
       ":2:2 (column \"open\"): \"1e39\" is outside the range of float"},
      {"zero price", header + "d,1,2\nd,1,0\n", defaults, "non-positive price",
       ":3:3 (column \"close\"): price \"0\" is not > 0"},
      {"negative price", header + "d,1,-2.5\n", defaults, "non-positive price",
       ":2:3 (column \"close\"): price \"-2.5\" is not > 0"},
      {"header only", header, defaults, "too few rows",
       ":1: 0 data rows, at least 2 needed (min_rows = 2)"},
      {"one row", header + "d,1,2\n\n", defaults, "too few rows",
       ":2: 1 data rows, at least 2 needed (min_rows = 2)"},
      {"fewer rows than min_rows", header + "d,1,2\nd,1,2\nd,1,2\n",
       [](MarketCsvOptions& o) { o.min_rows = 5; }, "too few rows",
       ":4: 3 data rows, at least 5 needed (min_rows = 5)"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string path = write("bad.csv", c.contents);
    MarketCsvOptions options;
    c.set_options(options);
    expect_csv_error(path, options, c.error_name, path + c.detail_after_path);
  }
}

// ---------------------------------------------------------------------------------------------
// Synthetic market

// |observed - expected| <= 4 standard errors (two-sided 6e-5 false-failure rate for a normal
// estimate; all seeds are pinned, so a pass is reproducible).
void expect_within_sampling_error(const std::string& what, double observed, double expected,
                                  double standard_error) {
  std::printf("%s: observed %.6g, expected %.6g, standard error %.3g (%.2f se)\n", what.c_str(),
              observed, expected, standard_error, std::fabs(observed - expected) / standard_error);
  EXPECT_LE(std::fabs(observed - expected), 4.0 * standard_error) << what;
}

float feature(const MarketSeries& series, std::size_t t, std::size_t f) {
  return series.features[t * series.feature_count + f];
}

TEST(SyntheticMarket, ShapesAndNames) {
  SyntheticMarketConfig config;
  config.steps = 100;
  config.noise_feature_count = 2;
  const SyntheticMarket market = make_synthetic_market(config);
  EXPECT_EQ(market.series.steps, 100u);
  EXPECT_EQ(market.series.feature_count, 4u);
  EXPECT_EQ(market.series.feature_names,
            (std::vector<std::string>{"signal", "previous_return", "noise_0", "noise_1"}));
  EXPECT_EQ(market.series.features.size(), 400u);
  EXPECT_EQ(market.series.next_returns.size(), 100u);
  EXPECT_EQ(market.regimes.size(), 100u);
  // previous_return at t is the return into t: 0 at t = 0, then next_returns[t - 1].
  EXPECT_EQ(feature(market.series, 0, kSyntheticPreviousReturnFeature), 0.0f);
  for (std::size_t t = 1; t < 100; ++t)
    EXPECT_EQ(feature(market.series, t, kSyntheticPreviousReturnFeature),
              market.series.next_returns[t - 1]);
}

TEST(SyntheticMarket, SameSeedSameSeriesOtherSeedOtherSeries) {
  SyntheticMarketConfig config;
  config.steps = 5000;
  config.seed = 42;
  const SyntheticMarket a = make_synthetic_market(config);
  const SyntheticMarket b = make_synthetic_market(config);
  EXPECT_EQ(a.series.features, b.series.features);
  EXPECT_EQ(a.series.next_returns, b.series.next_returns);
  EXPECT_EQ(a.regimes, b.regimes);
  config.seed = 43;
  const SyntheticMarket c = make_synthetic_market(config);
  EXPECT_NE(a.series.next_returns, c.series.next_returns);
  EXPECT_NE(a.series.features, c.series.features);
}

// The regime stays with probability regime_persistence: the share of steps whose regime equals
// the previous one estimates it (binomial standard error). All four regimes occur, each for
// about a quarter of the time (the chain is symmetric), within a loose bound: with persistence
// 0.95 the occupancy is strongly autocorrelated.
TEST(SyntheticMarket, RegimesPersistAsConfigured) {
  for (const double persistence : {0.95, 0.5}) {
    SyntheticMarketConfig config;
    config.steps = 200000;
    config.seed = 7;
    config.regime_persistence = persistence;
    const SyntheticMarket market = make_synthetic_market(config);
    std::size_t stays = 0;
    std::array<std::size_t, kMarketRegimeCount> occupancy{};
    for (std::size_t t = 0; t < config.steps; ++t) {
      ++occupancy[static_cast<std::size_t>(market.regimes[t])];
      if (t > 0 && market.regimes[t] == market.regimes[t - 1]) ++stays;
    }
    const auto transitions = static_cast<double>(config.steps - 1);
    expect_within_sampling_error("stay share at persistence " + std::to_string(persistence),
                                 static_cast<double>(stays) / transitions, persistence,
                                 std::sqrt(persistence * (1.0 - persistence) / transitions));
    for (std::size_t r = 0; r < kMarketRegimeCount; ++r) {
      const double share = static_cast<double>(occupancy[r]) / static_cast<double>(config.steps);
      EXPECT_NEAR(share, 0.25, 0.05) << "regime " << r;
    }
  }
}

// Each regime's return law: the trending regimes' mean is +-trend_drift, the high-volatility
// regime's standard deviation is multiplier * volatility, and the mean-reverting regime's
// regression of r_{t+1} on r_t has slope -mean_reversion.
TEST(SyntheticMarket, RegimesShapeTheReturns) {
  SyntheticMarketConfig config;
  config.steps = 400000;
  config.seed = 8;
  config.trend_drift = 0.001;
  const SyntheticMarket market = make_synthetic_market(config);
  const MarketSeries& s = market.series;
  std::array<double, kMarketRegimeCount> sum{};
  std::array<double, kMarketRegimeCount> squares{};
  std::array<double, kMarketRegimeCount> count{};
  double xy = 0.0;  // mean-reverting regime: sum of r_t r_{t+1} and of r_t^2
  double xx = 0.0;
  for (std::size_t t = 0; t < s.steps; ++t) {
    const auto r = static_cast<std::size_t>(market.regimes[t]);
    const auto next = static_cast<double>(s.next_returns[t]);
    sum[r] += next;
    squares[r] += next * next;
    count[r] += 1.0;
    if (market.regimes[t] == MarketRegime::MeanReverting) {
      const auto previous = static_cast<double>(feature(s, t, kSyntheticPreviousReturnFeature));
      xy += previous * next;
      xx += previous * previous;
    }
  }
  const auto mean = [&](MarketRegime r) {
    const auto i = static_cast<std::size_t>(r);
    return sum[i] / count[i];
  };
  const auto standard_deviation = [&](MarketRegime r) {
    const auto i = static_cast<std::size_t>(r);
    return std::sqrt(squares[i] / count[i] - mean(r) * mean(r));
  };
  const auto count_of = [&](MarketRegime r) { return count[static_cast<std::size_t>(r)]; };

  expect_within_sampling_error("trending-up mean return", mean(MarketRegime::TrendingUp),
                               config.trend_drift,
                               config.volatility / std::sqrt(count_of(MarketRegime::TrendingUp)));
  expect_within_sampling_error("trending-down mean return", mean(MarketRegime::TrendingDown),
                               -config.trend_drift,
                               config.volatility / std::sqrt(count_of(MarketRegime::TrendingDown)));
  const double high_sigma = config.high_volatility_multiplier * config.volatility;
  // The standard error of a normal sample's standard deviation is sigma / sqrt(2 n).
  expect_within_sampling_error(
      "high-volatility return std", standard_deviation(MarketRegime::HighVolatility), high_sigma,
      high_sigma / std::sqrt(2.0 * count_of(MarketRegime::HighVolatility)));
  // Regression slope xy / xx, standard error volatility / sqrt(xx).
  expect_within_sampling_error("mean-reverting slope", xy / xx, -config.mean_reversion,
                               config.volatility / std::sqrt(xx));
}

// sign(signal_t) == sign(r_{t+1}) with probability (1 + strength) / 2: the hit share over T
// steps estimates it with binomial standard error. Strength 0 is at chance and strength 1 is
// always right. A generator that ignored the strength would fail both 0.3 (0.65 is ~100
// standard errors from 0.5) and 0.
TEST(SyntheticMarket, SignalPredictsTheNextReturnSignWithTheConfiguredStrength) {
  for (const double strength : {0.0, 0.1, 0.3, 1.0}) {
    SyntheticMarketConfig config;
    config.steps = 100000;
    config.seed = 9;
    config.signal_strength = strength;
    const SyntheticMarket market = make_synthetic_market(config);
    std::size_t hits = 0;
    for (std::size_t t = 0; t < config.steps; ++t) {
      const bool signal_up = feature(market.series, t, kSyntheticSignalFeature) > 0.0f;
      const bool return_up = market.series.next_returns[t] >= 0.0f;
      if (signal_up == return_up) ++hits;
    }
    const double steps = static_cast<double>(config.steps);
    const double hit_share = static_cast<double>(hits) / steps;
    const double p = (1.0 + strength) / 2.0;
    if (strength == 1.0) {
      EXPECT_EQ(hits, config.steps);
      continue;
    }
    expect_within_sampling_error("hit share at strength " + std::to_string(strength), hit_share, p,
                                 std::sqrt(p * (1.0 - p) / steps));
  }
}

// The other features carry no information about the next return's sign, at any strength.
TEST(SyntheticMarket, NoiseFeaturesAreUnitVarianceAr1AndUninformative) {
  SyntheticMarketConfig config;
  config.steps = 200000;
  config.seed = 10;
  config.signal_strength = 0.5;
  config.noise_feature_count = 2;
  config.noise_autocorrelation = 0.9;
  const SyntheticMarket market = make_synthetic_market(config);
  const MarketSeries& s = market.series;
  const double n = static_cast<double>(s.steps);
  for (std::size_t k = 0; k < config.noise_feature_count; ++k) {
    const std::size_t f = kSyntheticFirstNoiseFeature + k;
    double sum = 0.0;
    double squares = 0.0;
    double lag_products = 0.0;
    std::size_t hits = 0;
    for (std::size_t t = 0; t < s.steps; ++t) {
      const auto v = static_cast<double>(feature(s, t, f));
      sum += v;
      squares += v * v;
      if (t > 0) lag_products += v * static_cast<double>(feature(s, t - 1, f));
      if ((v > 0.0) == (s.next_returns[t] >= 0.0f)) ++hits;
    }
    const double variance = squares / n - (sum / n) * (sum / n);
    // An AR(1) with coefficient a: the sample variance's standard error is about
    // sqrt(2 (1 + a^2) / (1 - a^2) / n), the lag-1 autocorrelation's sqrt((1 - a^2) / n).
    const double a = config.noise_autocorrelation;
    const std::string name = "noise_" + std::to_string(k);
    expect_within_sampling_error(name + " variance", variance, 1.0,
                                 std::sqrt(2.0 * (1.0 + a * a) / (1.0 - a * a) / n));
    expect_within_sampling_error(name + " lag-1 autocorrelation", lag_products / squares, a,
                                 std::sqrt((1.0 - a * a) / n));
    expect_within_sampling_error(name + " sign hit share", static_cast<double>(hits) / n, 0.5,
                                 std::sqrt(0.25 / n));
  }
}

TEST(SyntheticMarket, InvalidConfigNamesEveryField) {
  SyntheticMarketConfig config;
  config.steps = 0;
  config.signal_strength = 1.5;
  config.regime_persistence = -0.1;
  config.volatility = 0.0;
  config.trend_drift = -1.0;
  config.mean_reversion = 1.0;
  config.high_volatility_multiplier = 0.5;
  config.noise_autocorrelation = std::nan("");
  try {
    make_synthetic_market(config);
    FAIL() << "no throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const char* part :
         {"steps = 0", "signal_strength = 1.5, allowed [0, 1]",
          "regime_persistence = -0.1, allowed [0, 1]", "volatility = 0, allowed (0, inf), finite",
          "trend_drift = -1, allowed [0, inf), finite", "mean_reversion = 1, allowed [0, 1)",
          "high_volatility_multiplier = 0.5, allowed [1, inf), finite",
          "noise_autocorrelation = nan, allowed [0, 1)"})
      EXPECT_NE(what.find(part), std::string::npos) << "missing \"" << part << "\" in " << what;
  }
}

// ---------------------------------------------------------------------------------------------
// Normalization

// Three columns of T rows: a random walk around 1e4 (a price: large offset, small local
// variance), a constant, and white noise.
MarketSeries normalization_series(std::size_t steps) {
  MarketSeries series;
  series.steps = steps;
  series.feature_count = 3;
  series.feature_names = {"walk", "constant", "noise"};
  series.next_returns.assign(steps, 0.0f);
  std::mt19937_64 rng(12);
  std::normal_distribution<double> normal(0.0, 1.0);
  double walk = 1e4;
  for (std::size_t t = 0; t < steps; ++t) {
    walk += normal(rng);
    series.features.push_back(static_cast<float>(walk));
    series.features.push_back(5.0f);
    series.features.push_back(static_cast<float>(normal(rng)));
  }
  return series;
}

// z-score of row t over rows [first, last] of column f, two-pass in double.
double direct_z_score(const MarketSeries& s, std::size_t f, std::size_t first, std::size_t last,
                      std::size_t t, double epsilon) {
  double sum = 0.0;
  for (std::size_t i = first; i <= last; ++i) sum += static_cast<double>(feature(s, i, f));
  const auto count = static_cast<double>(last - first + 1);
  const double mean = sum / count;
  double squares = 0.0;
  for (std::size_t i = first; i <= last; ++i) {
    const double d = static_cast<double>(feature(s, i, f)) - mean;
    squares += d * d;
  }
  return (static_cast<double>(feature(s, t, f)) - mean) / std::sqrt(squares / count + epsilon);
}

// |got - direct| <= 1e-6 (1 + |direct|): the float rounding of z (6e-8 relative) with margin
// for the rounding of the rolling sums.
void expect_matches_direct(const MarketSeries& s, const std::vector<float>& normalized,
                           std::size_t window, const FeatureNormalizationOptions& options) {
  double worst_share = 0.0;
  for (std::size_t f = 0; f < s.feature_count; ++f) {
    for (std::size_t t = 0; t < s.steps; ++t) {
      const std::size_t first = t + 1 >= window ? t + 1 - window : 0;
      const std::size_t last = options.kind == FeatureNormalization::Global ? s.steps - 1 : t;
      const double direct = direct_z_score(
          s, f, options.kind == FeatureNormalization::Global ? 0 : first, last, t, options.epsilon);
      const double tolerance = 1e-6 * (1.0 + std::fabs(direct));
      const double got = static_cast<double>(normalized[t * s.feature_count + f]);
      ASSERT_LE(std::fabs(got - direct), tolerance) << "t " << t << " feature " << f;
      worst_share = std::max(worst_share, std::fabs(got - direct) / tolerance);
    }
  }
  std::printf("normalization (%s, window %zu) uses %.1f%% of its tolerance\n",
              options.kind == FeatureNormalization::Global ? "global" : "rolling", window,
              100.0 * worst_share);
}

TEST(FeatureNormalization, GlobalZScoreHasZeroMeanUnitVarianceAndConstantsGiveZero) {
  const MarketSeries s = normalization_series(3000);
  FeatureNormalizationOptions options;
  options.kind = FeatureNormalization::Global;
  const std::vector<float> z = normalize_features(s, options);
  expect_matches_direct(s, z, s.steps, options);
  for (const std::size_t f : {0u, 2u}) {
    double sum = 0.0;
    double squares = 0.0;
    for (std::size_t t = 0; t < s.steps; ++t) {
      sum += static_cast<double>(z[t * 3 + f]);
      squares += static_cast<double>(z[t * 3 + f]) * static_cast<double>(z[t * 3 + f]);
    }
    EXPECT_NEAR(sum / 3000.0, 0.0, 1e-6) << "feature " << f;
    EXPECT_NEAR(squares / 3000.0, 1.0, 1e-5) << "feature " << f;
  }
  for (std::size_t t = 0; t < s.steps; ++t) EXPECT_EQ(z[t * 3 + 1], 0.0f);
}

// Windows 1 (every z is 0), 7, 256 and one longer than the series (an expanding window).
TEST(FeatureNormalization, RollingZScoreMatchesTheDirectWindowComputation) {
  const MarketSeries s = normalization_series(3000);
  for (const std::size_t window : {1u, 7u, 256u, 5000u}) {
    FeatureNormalizationOptions options;
    options.kind = FeatureNormalization::Rolling;
    options.rolling_window = window;
    const std::vector<float> z = normalize_features(s, options);
    expect_matches_direct(s, z, window, options);
    if (window == 1) {
      for (const float v : z) EXPECT_EQ(v, 0.0f);
    }
  }
}

TEST(FeatureNormalization, RollingIsCausalBitForBit) {
  MarketSeries s = normalization_series(1000);
  FeatureNormalizationOptions options;
  options.rolling_window = 64;
  const std::vector<float> before = normalize_features(s, options);
  const std::size_t changed_row = 700;
  for (std::size_t f = 0; f < 3; ++f) s.features[changed_row * 3 + f] += 1000.0f;
  const std::vector<float> after = normalize_features(s, options);
  for (std::size_t i = 0; i < changed_row * 3; ++i) ASSERT_EQ(after[i], before[i]) << "index " << i;
  EXPECT_NE(after[changed_row * 3], before[changed_row * 3]);
}

TEST(FeatureNormalization, InvalidOptionsAreNamed) {
  const MarketSeries s = normalization_series(10);
  FeatureNormalizationOptions options;
  options.rolling_window = 0;
  options.epsilon = -1.0;
  try {
    normalize_features(s, options);
    FAIL() << "no throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rolling_window = 0, allowed >= 1 for Rolling"), std::string::npos) << what;
    EXPECT_NE(what.find("epsilon = -1, allowed (0, inf), finite"), std::string::npos) << what;
  }
}

}  // namespace
