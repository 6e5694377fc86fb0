// Trading environment kernels (kernels/env/trading_step.cu): N environments over one
// device-resident market series, stepped together. The semantics and the float order of
// operations are tests/reference/trading_reference.h's, so that GPU and CPU match bit for bit.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/core/philox.h"

namespace resident::kernels {

// The market series on the device (read only), uploaded once at setup.
struct TradingSeriesDeviceView {
  const float* features = nullptr;      // [T, F] row-major, normalized
  const float* next_returns = nullptr;  // [T]
  std::int32_t steps = 0;               // T >= W + L, fits int32
  std::int32_t feature_count = 0;       // F >= 1
};

struct TradingParams {
  std::int32_t window = 1;          // W >= 1
  std::int32_t episode_length = 1;  // L >= 1
  float cost_per_unit = 0.0f;       // c >= 0
  std::uint64_t seed = 0;           // Philox key of the start draws (already mixed)
};

// Per-environment state, struct of arrays, [N] each; read and written by the kernels only.
struct TradingStateView {
  std::int32_t* start = nullptr;            // s_n
  std::int32_t* step_in_episode = nullptr;  // k_n in [0, L)
  std::int32_t* position = nullptr;         // p_n in {-1, 0, 1}
  float* episode_return = nullptr;          // current episode's rewards so far (float, in order)
  std::uint32_t* episode = nullptr;         // episodes begun by env n, minus one (the counter)
  float* completed_return_sum = nullptr;    // sum of ended episodes' returns, in episode order
  std::uint32_t* completed_episodes = nullptr;  // episodes ended
};

// Outputs of one step, overwritten every step.
struct TradingStepOutputs {
  float* rewards = nullptr;            // [N]
  std::uint8_t* dones = nullptr;       // [N] 1 where the episode ended (truncated; never terminal)
  float* next_observations = nullptr;  // [N, D] s' of the transition: where done, the final one
  float* observations = nullptr;       // [N, D] current after auto-reset: what the policy sees next
  float* episode_returns = nullptr;    // [N] the ended episode's return where done, NaN elsewhere
  std::uint32_t* invalid_actions = nullptr;  // [1] accumulates the count of actions not in {0,1,2}
};

// The start draw of episode e of env n: word 0 of cuRAND Philox4x32-10 initialized with
// (seed, subsequence n, offset 4 e), i.e. counter block e of subsequence n. Pure function of
// (seed, n, e), so a CUDA-graph replay with the device counter draws fresh starts.

// Resets every environment: episode counter 0, start from its episode-0 draw, step 0, flat,
// returns 0, completed sums and counts 0; writes observations [N, D] (D = W * F + 1).
void launch_trading_reset(TradingStateView state, float* observations,
                          TradingSeriesDeviceView series, TradingParams params,
                          std::size_t env_count, cudaStream_t stream);

// One step of every environment with actions [N] in {0, 1, 2} = short/flat/long (other values
// count into outputs.invalid_actions and act as flat). Reward and episode return exactly as the
// reference (round-to-nearest, no contraction). Where an episode ends (k == L) the env writes
// its final observation to next_observations, its return to episode_returns, adds it (float,
// in episode order) to completed_return_sum and counts it in completed_episodes (reduce both
// with launch_episode_stats), then auto-resets with the draw of its next episode.
// Deterministic (each env's state is written by one lane; no float atomics). `actions` must not
// alias the outputs; next_observations and observations must not alias each other or the series
// (both observations' windows are loaded before either is stored).
void launch_trading_step(TradingStepOutputs outputs, TradingStateView state,
                         const std::int32_t* actions, TradingSeriesDeviceView series,
                         TradingParams params, std::size_t env_count, cudaStream_t stream);

}  // namespace resident::kernels
