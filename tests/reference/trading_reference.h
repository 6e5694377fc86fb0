// The trading environment on the CPU: N environments over one market series stepping
// together, struct of arrays, exactly as the GPU kernel does it (one env's state per warp's lane 0), in
// float, so that the kernel can match it bit for bit. Also the earnings of the oracle policy
// that knows the signal, so that a learning test can say what the best simple policy earns.
//
// Series: T steps, normalized features x[t, f] ([T, F] row-major) and next returns r[t] (the
// return from step t to t + 1, MarketSeries::next_returns). Config: window W, episode length L,
// cost c per unit of position change.
//
// Environment n holds start s_n, step-in-episode k_n in [0, L), position p_n in {-1, 0, +1} and
// episode_return_n (float). Its current time is t = s_n + k_n.
//
// Observation of env n, D = W * F + 1 floats:
//   obs[w * F + f] = x[t - W + 1 + w, f]   for w in [0, W), f in [0, F)   (oldest row first)
//   obs[W * F]     = float(p_n)
//
// Starts: an episode starts at s in [W - 1, T - L - 1] (its first observation needs W rows, its
// last step the return r[s + L - 1], the observation that ends it the row s + L), so the series
// needs T >= W + L. From one 32-bit draw d:
//   s = (W - 1) + floor(d * S / 2^32),  S = T - W - L + 1 starts
// (64-bit product, then the high 32 bits; bias at most S / 2^32). A new episode is flat (p = 0).
//
// Step, actions a_n in {0, 1, 2} = {short, flat, long}; for each env independently:
//   1. t = s_n + k_n; p' = a_n - 1
//   2. reward = float(p') * r[t] - c * float(|p' - p_n|)      (float; both products are exact,
//      p' is in {-1, 0, 1} and |p' - p_n| in {0, 1, 2}, so the subtraction is the only rounding
//      and a fused multiply-add gives the same result)
//   3. episode_return_n = episode_return_n + reward          (float, in step order)
//   4. p_n = p'; k_n = k_n + 1
//   5. if k_n == L the episode ends: final observation = the observation now (time s_n + L,
//      position p'), the episode's return is reported, then the env resets: s_n from its reset
//      draw, k_n = 0, p_n = 0, episode_return_n = 0.
// Episodes end only by the time limit: an ended episode is truncated, never terminated (the
// observation does not show the time left, so a learner bootstraps from the final observation's
// value). All environments that start together end together.
//
// Errors (sizes, out-of-range actions, invalid config) throw std::invalid_argument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace resident::reference {

inline constexpr std::int32_t kTradingActionCount = 3;  // 0 short, 1 flat, 2 long

// Non-owning: the spans must outlive every TradingReference built on them.
struct TradingSeriesView {
  std::span<const float> normalized_features;  // [T, F] row-major
  std::span<const float> next_returns;         // [T]
  std::size_t feature_count = 0;               // F
};

struct TradingReferenceConfig {
  std::size_t window = 1;          // W >= 1
  std::size_t episode_length = 1;  // L >= 1
  float cost_per_unit = 0.0f;      // c, finite, >= 0
};

// Struct of arrays, [N] each.
struct TradingBatchState {
  std::vector<std::int32_t> start;            // s_n
  std::vector<std::int32_t> step_in_episode;  // k_n
  std::vector<std::int32_t> position;         // p_n
  std::vector<float> episode_return;          // rewards of the current episode so far

  std::size_t env_count() const { return start.size(); }
};

// Outputs of one batch step, [N] (final_observations [N, D]).
struct TradingBatchStep {
  std::vector<float> rewards;
  std::vector<std::uint8_t> truncated;    // 1 where the episode ended (terminated is always 0)
  std::vector<float> final_observations;  // the observation that ended the episode, NaN elsewhere
  std::vector<float> episode_returns;     // the ended episode's return, NaN elsewhere
};

class TradingReference {
 public:
  // Throws std::invalid_argument unless F >= 1, the feature count matches T * F, W >= 1,
  // L >= 1, T >= W + L, T fits in int32, and cost_per_unit is finite and >= 0.
  TradingReference(TradingSeriesView series, TradingReferenceConfig config);

  std::size_t steps() const { return series_.next_returns.size(); }  // T
  std::size_t observation_size() const;                              // D = W * F + 1
  std::size_t first_start() const;                                   // W - 1
  std::size_t start_count() const;                                   // S = T - W - L + 1
  std::size_t start_from_draw(std::uint32_t draw) const;
  const TradingReferenceConfig& config() const { return config_; }

  // N = start_draws.size() >= 1 environments at their first step, env n starting at
  // start_from_draw(start_draws[n]), flat.
  TradingBatchState reset(std::span<const std::uint32_t> start_draws) const;

  // observations [N, D].
  void observe(const TradingBatchState& state, std::span<float> observations) const;

  // One step of every environment; reset_draws [N] are read only where an episode ends.
  TradingBatchStep step(TradingBatchState& state, std::span<const std::int32_t> actions,
                        std::span<const std::uint32_t> reset_draws) const;

 private:
  void observe_env(const TradingBatchState& state, std::size_t env, float* observation) const;

  TradingSeriesView series_;
  TradingReferenceConfig config_;
};

struct PolicyEarnings {
  std::size_t episodes = 0;
  std::size_t steps = 0;                       // episodes * L
  double mean_reward_per_step = 0.0;           // sum of rewards / steps
  double mean_episode_return = 0.0;            // of the float episode returns
  double episode_return_standard_error = 0.0;  // sample std (n - 1) / sqrt(n); NaN for n = 1
};

// The oracle policy: position sign(signal[t]) at time t (flat where signal[t] == 0), i.e. action
// sign + 1, played by `env_count` environments for `episodes_per_env` episodes each. `signal` is
// [T], the raw signal column (the synthetic market's kSyntheticSignalFeature column; not the
// normalized one). Start and reset draws come from std::mt19937(seed): N start draws, then N
// reset draws before every step. Throws std::invalid_argument for a signal of the wrong size,
// env_count == 0, or episodes_per_env == 0.
PolicyEarnings oracle_policy_earnings(const TradingReference& reference,
                                      std::span<const float> signal, std::size_t env_count,
                                      std::size_t episodes_per_env, std::uint32_t seed);

}  // namespace resident::reference
