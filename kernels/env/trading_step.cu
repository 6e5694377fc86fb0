// Trading environment step and reset (contract in kernels/env/trading_step.h).
// Layout: one block per 128 consecutive environments. Phase 1: one thread per env reads and
// writes its state (reward, return, auto-reset) and leaves the time and position of its two
// observations in shared memory. Phase 2: the block writes the observations of its envs
// cooperatively; an observation's W * F feature values are one contiguous run of the row-major
// series (rows t - W + 1 .. t), so both the reads and the writes are coalesced.
// Float order: reward = fl(fl(float(p') * r[t]) - fl(c * float(|p' - p|))), return =
// fl(return + reward), with explicit round-to-nearest intrinsics so no contraction can change
// a bit. Deterministic: no float atomics (the invalid-action count is an integer atomic).
#include "kernels/core/philox.cuh"
#include "kernels/env/trading_step.h"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr int kEnvsPerBlock = 128;

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

// Observations of envs [first_env, first_env + envs) into out [N, D]: env e at time time[e]
// (local index) with position position[e].
__device__ inline void write_observations(float* out, const std::int32_t* time,
                                          const std::int32_t* position, std::size_t first_env,
                                          int envs, const TradingSeriesDeviceView& series,
                                          std::int32_t window) {
  const std::size_t features = static_cast<std::size_t>(series.feature_count);
  const std::size_t window_values = static_cast<std::size_t>(window) * features;
  const std::size_t size = window_values + 1;
  const std::size_t total = static_cast<std::size_t>(envs) * size;
  float* base = out + first_env * size;
  for (std::size_t i = threadIdx.x; i < total; i += blockDim.x) {
    const std::size_t e = i / size;
    const std::size_t j = i - e * size;
    if (j < window_values) {
      const std::size_t first_row = static_cast<std::size_t>(time[e] + 1 - window);
      base[i] = series.features[first_row * features + j];
    } else {
      base[i] = static_cast<float>(position[e]);
    }
  }
}

__global__ void __launch_bounds__(kEnvsPerBlock)
    trading_reset(TradingStateView state, float* observations, TradingSeriesDeviceView series,
                  TradingParams params, std::size_t env_count) {
  __shared__ std::int32_t time[kEnvsPerBlock];
  __shared__ std::int32_t position[kEnvsPerBlock];
  const std::size_t first_env = std::size_t{blockIdx.x} * kEnvsPerBlock;
  const int envs = static_cast<int>(min(std::size_t{kEnvsPerBlock}, env_count - first_env));
  const int local = static_cast<int>(threadIdx.x);
  if (local < envs) {
    const std::size_t n = first_env + static_cast<std::size_t>(local);
    const std::int32_t start = episode_start(series, params, n, 0);
    state.start[n] = start;
    state.step_in_episode[n] = 0;
    state.position[n] = 0;
    state.episode_return[n] = 0.0f;
    state.episode[n] = 0;
    state.completed_return_sum[n] = 0.0f;
    state.completed_episodes[n] = 0;
    time[local] = start;
    position[local] = 0;
  }
  __syncthreads();
  write_observations(observations, time, position, first_env, envs, series, params.window);
}

__global__ void __launch_bounds__(kEnvsPerBlock)
    trading_step(TradingStepOutputs outputs, TradingStateView state, const std::int32_t* actions,
                 TradingSeriesDeviceView series, TradingParams params, std::size_t env_count) {
  __shared__ std::int32_t next_time[kEnvsPerBlock];
  __shared__ std::int32_t next_position[kEnvsPerBlock];
  __shared__ std::int32_t time[kEnvsPerBlock];
  __shared__ std::int32_t position[kEnvsPerBlock];
  const std::size_t first_env = std::size_t{blockIdx.x} * kEnvsPerBlock;
  const int envs = static_cast<int>(min(std::size_t{kEnvsPerBlock}, env_count - first_env));
  const int local = static_cast<int>(threadIdx.x);
  if (local < envs) {
    const std::size_t n = first_env + static_cast<std::size_t>(local);
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
    next_time[local] = start + step;
    next_position[local] = new_position;
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
    time[local] = start + step;
    position[local] = current_position;
  }
  __syncthreads();
  write_observations(outputs.next_observations, next_time, next_position, first_env, envs, series,
                     params.window);
  write_observations(outputs.observations, time, position, first_env, envs, series,
                     params.window);
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
  trading_reset<<<blocks_for(env_count), kEnvsPerBlock, 0, stream>>>(state, observations, series,
                                                                     params, env_count);
  RESIDENT_CHECK_LAUNCH("trading_reset");
}

void launch_trading_step(TradingStepOutputs outputs, TradingStateView state,
                         const std::int32_t* actions, TradingSeriesDeviceView series,
                         TradingParams params, std::size_t env_count, cudaStream_t stream) {
  const NvtxRange range("env/trading_step");
  if (env_count == 0) return;
  trading_step<<<blocks_for(env_count), kEnvsPerBlock, 0, stream>>>(outputs, state, actions,
                                                                    series, params, env_count);
  RESIDENT_CHECK_LAUNCH("trading_step");
}

}  // namespace resident::kernels
