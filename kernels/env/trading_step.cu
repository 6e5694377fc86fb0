// Trading environment step and reset (contract in kernels/env/trading_step.h).
// Layout: one warp per environment, kEnvsPerBlock warps per block. Lane 0 reads and writes the
// env's state (reward, return, auto-reset) and broadcasts the time and position of its two
// observations; the warp then writes them: an observation's W * F feature values are one
// contiguous run of the row-major series (rows t - W + 1 .. t), so both the reads and the
// writes are coalesced, and a step costs one state update plus 2 (W * F + 1) / 32 copies per lane.
// Float order: reward = fl(fl(float(p') * r[t]) - fl(c * float(|p' - p|))), return =
// fl(return + reward), with explicit round-to-nearest intrinsics so no contraction can change
// a bit. Deterministic: no float atomics (the invalid-action count is an integer atomic).
#include "kernels/core/copy_row_pair.cuh"
#include "kernels/core/philox.cuh"
#include "kernels/core/programmatic_launch.cuh"
#include "kernels/env/trading_step.h"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr int kEnvsPerBlock = 4;  // warps per block: small vector envs still spread over SMs
constexpr unsigned kFullMask = 0xffffffffu;

// std::numeric_limits<float>::quiet_NaN(), the reference's "no value" marker.
__device__ inline float quiet_nan() { return __int_as_float(0x7fc00000); }

// Start of episode `episode` of env `env` (see the header): s = (W - 1) + floor(d * S / 2^32).
__device__ inline std::int32_t episode_start(const TradingSeriesDeviceView& series,
                                             const TradingParams& params, std::size_t env,
                                             std::uint32_t episode) {
  curandStatePhilox4_32_10_t state =
      philox_state(PhiloxKey{params.seed, std::uint64_t{4} * episode}, env);
  const std::uint32_t draw = curand(&state);
  const auto start_count =
      static_cast<std::uint64_t>(series.steps - params.window - params.episode_length + 1);
  return params.window - 1 +
         static_cast<std::int32_t>((std::uint64_t{draw} * start_count) >> 32);
}

// The first feature of the window that ends at time `time` (local index).
__device__ inline const float* window_at(const TradingSeriesDeviceView& series, std::int32_t time,
                                         std::int32_t window) {
  const auto first_time = static_cast<std::size_t>(time + 1 - window);
  return series.features + first_time * static_cast<std::size_t>(series.feature_count);
}

// The observation of one env at time `time` (local index) with position `position` into
// row [D] (D = W * F + 1), written by the calling warp (every lane calls it).
__device__ inline void write_observation_by_warp(float* row, std::int32_t time,
                                                 std::int32_t position,
                                                 const TradingSeriesDeviceView& series,
                                                 std::int32_t window, unsigned lane) {
  const std::size_t window_values =
      static_cast<std::size_t>(window) * static_cast<std::size_t>(series.feature_count);
  const float* first = window_at(series, time, window);
  for (std::size_t j = lane; j < window_values; j += 32) row[j] = first[j];
  if (lane == 0) row[window_values] = static_cast<float>(position);
}

// The env this warp steps, or env_count when the warp has none.
__device__ inline std::size_t env_of_warp(std::size_t env_count) {
  const std::size_t env = std::size_t{blockIdx.x} * kEnvsPerBlock + threadIdx.x / 32;
  return env < env_count ? env : env_count;
}

__global__ void __launch_bounds__(kEnvsPerBlock * 32)
    trading_reset(TradingStateView state, float* observations, TradingSeriesDeviceView series,
                  TradingParams params, std::size_t env_count) {
  const std::size_t n = env_of_warp(env_count);
  if (n == env_count) return;  // warp-uniform
  const unsigned lane = threadIdx.x % 32;
  std::int32_t start = 0;
  if (lane == 0) {
    start = episode_start(series, params, n, 0);
    state.start[n] = start;
    state.step_in_episode[n] = 0;
    state.position[n] = 0;
    state.episode_return[n] = 0.0f;
    state.episode[n] = 0;
    state.completed_return_sum[n] = 0.0f;
    state.completed_episodes[n] = 0;
  }
  start = __shfl_sync(kFullMask, start, 0);
  const std::size_t size = static_cast<std::size_t>(params.window) * series.feature_count + 1;
  write_observation_by_warp(observations + n * size, start, 0, series, params.window, lane);
}

__global__ void __launch_bounds__(kEnvsPerBlock * 32)
    trading_step(TradingStepOutputs outputs, TradingStateView state, const std::int32_t* actions,
                 TradingSeriesDeviceView series, TradingParams params, std::size_t env_count) {
  allow_next_kernel_to_start();
  wait_for_prior_kernel();  // launched after the policy (launch_after_prior)
  const std::size_t n = env_of_warp(env_count);
  if (n == env_count) return;  // warp-uniform
  const unsigned lane = threadIdx.x % 32;
  // Lane 0's results: the times and positions of the two observations.
  std::int32_t next_time = 0, next_position = 0, time = 0, position = 0;
  if (lane == 0) {
    std::int32_t start = state.start[n];
    std::int32_t step = state.step_in_episode[n];
    const std::int32_t old_position = state.position[n];
    std::int32_t action = actions[n];
    if (action < 0 || action > 2) {
      atomicAdd(outputs.invalid_actions, 1u);
      action = 1;
    }
    const std::int32_t new_position = action - 1;
    const std::int32_t t = start + step;
    const auto change = static_cast<float>(abs(new_position - old_position));
    const float reward =
        __fsub_rn(__fmul_rn(static_cast<float>(new_position), series.next_returns[t]),
                  __fmul_rn(params.cost_per_unit, change));
    float episode_return = __fadd_rn(state.episode_return[n], reward);
    step += 1;
    outputs.rewards[n] = reward;
    next_time = start + step;
    next_position = new_position;
    std::int32_t current_position = new_position;
    if (step == params.episode_length) {
      outputs.dones[n] = 1;
      outputs.episode_returns[n] = episode_return;
      state.completed_return_sum[n] = __fadd_rn(state.completed_return_sum[n], episode_return);
      state.completed_episodes[n] += 1;
      const std::uint32_t episode = state.episode[n] + 1;
      state.episode[n] = episode;
      start = episode_start(series, params, n, episode);
      step = 0;
      current_position = 0;
      episode_return = 0.0f;
    } else {
      outputs.dones[n] = 0;
      outputs.episode_returns[n] = quiet_nan();
    }
    state.start[n] = start;
    state.step_in_episode[n] = step;
    state.position[n] = current_position;
    state.episode_return[n] = episode_return;
    time = start + step;
    position = current_position;
  }
  next_time = __shfl_sync(kFullMask, next_time, 0);
  next_position = __shfl_sync(kFullMask, next_position, 0);
  time = __shfl_sync(kFullMask, time, 0);
  position = __shfl_sync(kFullMask, position, 0);
  // Both observations' windows are loaded before either is stored (kernels/core/copy_row_pair.cuh).
  const std::size_t window_values =
      static_cast<std::size_t>(params.window) * static_cast<std::size_t>(series.feature_count);
  float* next_row = outputs.next_observations + n * (window_values + 1);
  float* row = outputs.observations + n * (window_values + 1);
  copy_row_pair(window_at(series, next_time, params.window), window_at(series, time, params.window),
                next_row, row, window_values, lane, 32u, [] {});
  if (lane == 0) {
    next_row[window_values] = static_cast<float>(next_position);
    row[window_values] = static_cast<float>(position);
  }
}

unsigned blocks_for(std::size_t env_count) {
  return static_cast<unsigned>((env_count + kEnvsPerBlock - 1) / kEnvsPerBlock);
}

}  // namespace

void launch_trading_reset(TradingStateView state, float* observations,
                          TradingSeriesDeviceView series, TradingParams params,
                          std::size_t env_count, cudaStream_t stream) {
  const NvtxRange range("env/trading_reset");
  if (env_count == 0) return;
  trading_reset<<<blocks_for(env_count), kEnvsPerBlock * 32, 0, stream>>>(
      state, observations, series, params, env_count);
  RESIDENT_CHECK_LAUNCH("trading_reset");
}

void launch_trading_step(TradingStepOutputs outputs, TradingStateView state,
                         const std::int32_t* actions, TradingSeriesDeviceView series,
                         TradingParams params, std::size_t env_count, cudaStream_t stream) {
  const NvtxRange range("env/trading_step");
  if (env_count == 0) return;
  launch_after_prior({dim3(blocks_for(env_count)), dim3(kEnvsPerBlock * 32)}, stream, trading_step,
                     outputs, state, actions, series, params, env_count);
  RESIDENT_CHECK_LAUNCH("trading_step");
}

}  // namespace resident::kernels
