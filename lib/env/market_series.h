// MarketSeries: the host copy of a market the trading environment runs on, its two
// sources -- a CSV file of prices and features, or a seeded synthetic generator with regimes
// and a learnable signal -- and the z-score normalization of its features. The environment
// uploads the normalized features and the returns once, in the "setup" phase.
//
// Time convention: step t has a feature row features[t, :] (what the agent may see at t) and a
// next return next_returns[t] = r_{t+1}, the return earned by holding a position from step t
// to step t + 1. A position chosen at t after observing rows <= t earns next_returns[t].
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace resident {

struct MarketSeries {
  std::size_t steps = 0;                   // T >= 1
  std::size_t feature_count = 0;           // F >= 1
  std::vector<std::string> feature_names;  // [F]
  std::vector<float> features;             // [T, F] row-major: features[t * F + f]
  std::vector<float> next_returns;         // [T]: next_returns[t] = r_{t+1}

  // The column of the feature called `name`; throws resident::Error naming the known columns
  // when there is none.
  std::size_t feature_index(std::string_view name) const;
};

// ---------------------------------------------------------------------------------------------
// CSV

enum class ReturnKind {
  Log,     // r_{t+1} = ln(p_{t+1} / p_t)
  Simple,  // r_{t+1} = p_{t+1} / p_t - 1
};

struct MarketCsvOptions {
  // The column whose values are prices; every price must be > 0.
  std::string price_column = "close";
  // A column that is read as text and never parsed (the timestamp). A file without a column of
  // this name has none; "" means none.
  std::string date_column = "date";
  // The feature columns, in this order. Empty: every column except the date column, in file
  // order (the price column included).
  std::vector<std::string> feature_columns;
  ReturnKind returns = ReturnKind::Log;
  // Data rows the file must have (values below 2 count as 2: one return needs two prices).
  // A trading environment with window W and episode length L needs W + L + 1 rows.
  std::size_t min_rows = 2;
};

// Reads a CSV file of R data rows into a series of T = R - 1 steps: step t has the feature
// values of row t and next_returns[t] computed from the prices of rows t and t + 1 (in double,
// stored as float); the last row contributes only its price.
//
// Format: the first non-blank line is the header of column names; every following non-blank
// line is a data row with as many fields as the header. Fields are separated by commas and
// trimmed of spaces and tabs; there is no quoting. Lines may end in "\n" or "\r\n"; blank
// lines are skipped (line numbers still count them). Only the price and feature columns are
// parsed, as decimal numbers (std::from_chars, an optional leading '+'); other columns may
// hold any text.
//
// Errors throw resident::Error with call() "load_market_csv", error_name() one of the names
// below, and a message that names the place as "<path>:<line>:<column>" (1-based; the column
// is the field's position in the line, followed by its header name):
//   "cannot open file"        the file is missing, unreadable or a directory  ("<path>: <why>")
//   "empty file"              no non-blank line                               ("<path>: ...")
//   "bad header"              an empty or duplicate column name ("<path>:<line>:<column>"), or
//                             a price/feature column the header lacks ("<path>:<line>")
//   "wrong number of fields"  a row with fewer or more fields than the header; the column is
//                             the first missing or the first extra field
//   "non-numeric value"       an empty field, or text that is not a number
//   "non-finite value"        NaN, inf, or a number outside the range of double (or, for a
//                             feature, of float)
//   "non-positive price"      a price <= 0
//   "too few rows"            fewer data rows than min_rows ("<path>:<last line>")
MarketSeries load_market_csv(const std::string& path, const MarketCsvOptions& options = {});

// ---------------------------------------------------------------------------------------------
// Synthetic market

// The regimes of the synthetic market. A regime holds for the step from t to t + 1.
enum class MarketRegime : std::uint8_t {
  TrendingUp = 0,     // r_{t+1} = +trend_drift + volatility * e
  TrendingDown = 1,   // r_{t+1} = -trend_drift + volatility * e
  MeanReverting = 2,  // r_{t+1} = -mean_reversion * r_t + volatility * e
  HighVolatility = 3  // r_{t+1} = high_volatility_multiplier * volatility * e
};
inline constexpr std::size_t kMarketRegimeCount = 4;

struct SyntheticMarketConfig {
  std::uint64_t seed = 0;
  std::size_t steps = 10000;  // T, >= 1
  // P(sign(signal_t) == sign(r_{t+1})) = (1 + signal_strength) / 2, in [0, 1];
  // 0: the signal is independent of the returns, 1: it always has the next return's sign.
  double signal_strength = 0.2;
  std::size_t noise_feature_count = 3;
  // P(regime_{t+1} == regime_t), in [0, 1]; otherwise one of the other three, uniformly.
  // The mean time in a regime is 1 / (1 - regime_persistence) steps.
  double regime_persistence = 0.98;
  double volatility = 0.01;                 // return std in the calm regimes, > 0
  double trend_drift = 0.0005;              // mean return in the trending regimes, >= 0
  double mean_reversion = 0.3;              // in [0, 1)
  double high_volatility_multiplier = 3.0;  // >= 1
  double noise_autocorrelation = 0.9;       // AR(1) coefficient of the noise features, [0, 1)
};

// The synthetic market's feature columns, in this order.
inline constexpr std::size_t kSyntheticSignalFeature = 0;          // "signal"
inline constexpr std::size_t kSyntheticPreviousReturnFeature = 1;  // "previous_return"
inline constexpr std::size_t kSyntheticFirstNoiseFeature = 2;      // "noise_0", "noise_1", ...

struct SyntheticMarket {
  MarketSeries series;                // F = 2 + noise_feature_count; log returns
  std::vector<MarketRegime> regimes;  // [T]: the regime of the step from t to t + 1
};

// Throws resident::Error listing every invalid field as "<field> = <value>, allowed <range>".
void validate(const SyntheticMarketConfig& config);

// Generates a market of config.steps steps. For t = 0, 1, ..., T - 1, in this order:
//   1. regime_t: t = 0: uniform over the four regimes; t > 0: regime_{t-1} with probability
//      regime_persistence, else one of the other three uniformly.
//   2. r_{t+1} from regime_t (table at MarketRegime; r_0 = 0), e ~ N(0, 1).
//   3. signal_t = s * |z|, z ~ N(0, 1), with s = sign(float(r_{t+1})) (+1 for 0) with
//      probability (1 + signal_strength) / 2 and -s otherwise.
//   4. for k = 0, 1, ...: noise_k,0 = e_k and noise_k,t = a * noise_k,t-1 + sqrt(1 - a^2) * e_k
//      (a = noise_autocorrelation, e_k ~ N(0, 1)): unit variance at every step.
// Features at t: [signal_t, r_t, noise_0,t, noise_1,t, ...]; next_returns[t] = float(r_{t+1}).
// Randomness: one std::mt19937_64 seeded with `seed`; a uniform is the draw's top 53 bits times
// 2^-53, a normal is Box-Muller's cosine branch on two uniforms; draws are taken in the order
// above. Same seed, same series (given the same libm for log, sqrt and cos).
// Throws resident::Error (validate) for an invalid config.
SyntheticMarket make_synthetic_market(const SyntheticMarketConfig& config);

// ---------------------------------------------------------------------------------------------
// Feature normalization

enum class FeatureNormalization {
  // Per column, the mean and variance over all T rows. Uses future rows: fine for a stationary
  // synthetic series, a look-ahead bias on real data.
  Global,
  // Per column, the mean and variance over the trailing window of rows
  // max(0, t - rolling_window + 1) .. t (fewer rows at the start). Causal: row t depends on
  // rows <= t only.
  Rolling,
};

struct FeatureNormalizationOptions {
  FeatureNormalization kind = FeatureNormalization::Rolling;
  std::size_t rolling_window = 256;  // rows, >= 1 (Rolling only)
  double epsilon = 1e-8;             // added to the variance, finite, > 0
};

// z-scores of series.features, [T, F] row-major like them:
//   z[t, f] = (x[t, f] - mean) / sqrt(var + epsilon),
// mean and var (population variance, divided by the row count) over the rows that `options`
// names, computed in double and stored as float. A constant column gives zeros.
// Throws resident::Error for an invalid rolling_window or epsilon.
std::vector<float> normalize_features(const MarketSeries& series,
                                      const FeatureNormalizationOptions& options);

}  // namespace resident
