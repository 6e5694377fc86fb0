// CartPole-v1 step and reset, one thread per environment (grid-stride).
// Contract: state arrays [N] (struct of arrays), actions [N] int32, outputs overwritten:
// observations [N, 4] row-major, rewards [N] float, terminated/truncated [N] uint8,
// final_observations [N, 4] (optional). Float math by explicit round-to-nearest intrinsics in
// the reference's order (no FMA), sin/cos in double rounded to float; strict threshold tests
// on the state after the step. Auto-reset draws come from cuRAND Philox keyed by
// (philox_seed, env id as subsequence, 4 * device-resident block counter as offset); the
// block that finishes the step last (a wrapping atomicInc ticket) advances the counter.
// Completed-episode returns go into per-env float accumulators and per-env counts (no float
// atomics; a later reduction sums them).
#include "kernels/env/cartpole_step.h"

#include <numbers>

#include "kernels/core/launch_config.h"
#include "kernels/core/philox.cuh"
#include "kernels/core/programmatic_launch.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

// gym's constants, derived in float as the reference derives them.
constexpr float kGravity = 9.8f;
constexpr float kMassCart = 1.0f;
constexpr float kMassPole = 0.1f;
constexpr float kTotalMass = kMassPole + kMassCart;
constexpr float kLength = 0.5f;
constexpr float kPoleMassLength = kMassPole * kLength;
constexpr float kForceMag = 10.0f;
constexpr float kTau = 0.02f;
constexpr float kFourThirds = 4.0f / 3.0f;
constexpr float kThetaThreshold = static_cast<float>(12 * 2 * std::numbers::pi / 360);
constexpr float kXThreshold = 2.4f;

struct State4 {
  float x, x_dot, theta, theta_dot;
};

__device__ inline float reset_component(unsigned draw) {
  const float u = __fmul_rn(static_cast<float>(draw >> 8), 0x1.0p-24f);  // exact
  return __fadd_rn(-0.05f, __fmul_rn(0.1f, u));
}

__device__ inline State4 reset_state(std::uint64_t philox_seed, std::size_t env,
                                     std::uint64_t block) {
  curandStatePhilox4_32_10_t rng = philox_state(PhiloxKey{philox_seed, 4 * block}, env);
  const unsigned d0 = curand(&rng);
  const unsigned d1 = curand(&rng);
  const unsigned d2 = curand(&rng);
  const unsigned d3 = curand(&rng);
  return {reset_component(d0), reset_component(d1), reset_component(d2), reset_component(d3)};
}

__device__ inline State4 dynamics(State4 s, std::int32_t action) {
  const float force = action == 1 ? kForceMag : -kForceMag;
  const float costheta = static_cast<float>(cos(static_cast<double>(s.theta)));
  const float sintheta = static_cast<float>(sin(static_cast<double>(s.theta)));
  float temp = __fmul_rn(__fmul_rn(kPoleMassLength, __fmul_rn(s.theta_dot, s.theta_dot)), sintheta);
  temp = __fdiv_rn(__fadd_rn(force, temp), kTotalMass);
  const float numerator = __fsub_rn(__fmul_rn(kGravity, sintheta), __fmul_rn(costheta, temp));
  const float denominator = __fmul_rn(
      kLength, __fsub_rn(kFourThirds,
                         __fdiv_rn(__fmul_rn(kMassPole, __fmul_rn(costheta, costheta)), kTotalMass)));
  const float thetaacc = __fdiv_rn(numerator, denominator);
  const float xacc =
      __fsub_rn(temp, __fdiv_rn(__fmul_rn(__fmul_rn(kPoleMassLength, thetaacc), costheta), kTotalMass));
  State4 next;
  next.x = __fadd_rn(s.x, __fmul_rn(kTau, s.x_dot));
  next.x_dot = __fadd_rn(s.x_dot, __fmul_rn(kTau, xacc));
  next.theta = __fadd_rn(s.theta, __fmul_rn(kTau, s.theta_dot));
  next.theta_dot = __fadd_rn(s.theta_dot, __fmul_rn(kTau, thetaacc));
  return next;
}

__device__ inline void store_row(float* rows, std::size_t n, State4 s) {
  float4* row = reinterpret_cast<float4*>(rows) + n;  // rows are 16-byte aligned (cudaMalloc)
  *row = make_float4(s.x, s.x_dot, s.theta, s.theta_dot);
}

__device__ inline void store_state(CartPoleDeviceState st, std::size_t n, State4 s) {
  st.x[n] = s.x;
  st.x_dot[n] = s.x_dot;
  st.theta[n] = s.theta;
  st.theta_dot[n] = s.theta_dot;
}

__global__ void cartpole_reset(float* observations, CartPoleDeviceState st, std::size_t env_count,
                               std::uint64_t philox_seed) {
  for (std::size_t n = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; n < env_count;
       n += std::size_t{gridDim.x} * blockDim.x) {
    const State4 s = reset_state(philox_seed, n, 0);
    store_state(st, n, s);
    st.elapsed_steps[n] = 0;
    st.episode_return[n] = 0.0f;
    st.completed_return_sum[n] = 0.0f;
    st.completed_episodes[n] = 0;
    store_row(observations, n, s);
    if (n == 0) {  // nobody else reads them in this launch
      *st.philox_block = 1;
      *st.step_ticket = 0;
    }
  }
}

__global__ void cartpole_step(CartPoleStepOutputs out, CartPoleDeviceState st,
                              const std::int32_t* actions, std::size_t env_count,
                              std::uint64_t philox_seed) {
  allow_next_kernel_to_start();
  wait_for_prior_kernel();  // launched after the policy (launch_after_prior)
  const std::uint64_t block = *st.philox_block;
  for (std::size_t n = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; n < env_count;
       n += std::size_t{gridDim.x} * blockDim.x) {
    const State4 next = dynamics({st.x[n], st.x_dot[n], st.theta[n], st.theta_dot[n]}, actions[n]);
    const std::int32_t elapsed = st.elapsed_steps[n] + 1;
    const float episode_return = __fadd_rn(st.episode_return[n], 1.0f);
    const bool terminated = next.x < -kXThreshold || next.x > kXThreshold ||
                            next.theta < -kThetaThreshold || next.theta > kThetaThreshold;
    const bool truncated = elapsed >= kCartPoleMaxEpisodeSteps;
    out.rewards[n] = 1.0f;
    out.terminated[n] = terminated ? 1 : 0;
    out.truncated[n] = truncated ? 1 : 0;
    if (terminated || truncated) {
      if (out.final_observations != nullptr) store_row(out.final_observations, n, next);
      st.completed_return_sum[n] = __fadd_rn(st.completed_return_sum[n], episode_return);
      st.completed_episodes[n] += 1;
      const State4 fresh = reset_state(philox_seed, n, block);
      store_state(st, n, fresh);
      st.elapsed_steps[n] = 0;
      st.episode_return[n] = 0.0f;
      store_row(out.observations, n, fresh);
    } else {
      if (out.final_observations != nullptr) {
        const float nan = __int_as_float(0x7fc00000);
        store_row(out.final_observations, n, {nan, nan, nan, nan});
      }
      store_state(st, n, next);
      st.elapsed_steps[n] = elapsed;
      st.episode_return[n] = episode_return;
      store_row(out.observations, n, next);
    }
  }
  // Every thread of this block has read *philox_block (above); the last block to take a ticket
  // therefore writes after every block's read. atomicInc wraps the ticket to 0 for the next step.
  __syncthreads();
  if (threadIdx.x == 0 && atomicInc(st.step_ticket, gridDim.x - 1) == gridDim.x - 1)
    *st.philox_block = block + 1;
}

}  // namespace

void launch_cartpole_reset(float* observations, CartPoleDeviceState state, std::size_t env_count,
                           std::uint64_t philox_seed, cudaStream_t stream) {
  const NvtxRange range("env/cartpole_reset");
  if (env_count == 0) return;
  cartpole_reset<<<grid_stride_blocks(env_count, 256), 256, 0, stream>>>(observations, state,
                                                                         env_count, philox_seed);
  RESIDENT_CHECK_LAUNCH("cartpole_reset");
}

void launch_cartpole_step(CartPoleStepOutputs outputs, CartPoleDeviceState state,
                          const std::int32_t* actions, std::size_t env_count,
                          std::uint64_t philox_seed, cudaStream_t stream) {
  const NvtxRange range("env/cartpole_step");
  if (state.philox_block == nullptr || state.step_ticket == nullptr)
    throw Error("launch_cartpole_step", "invalid argument",
                "state.philox_block and state.step_ticket must be set", __FILE__, __LINE__);
  if (env_count == 0) return;
  launch_after_prior({dim3(grid_stride_blocks(env_count, 256)), dim3(256)}, stream, cartpole_step,
                     outputs, state, actions, env_count, philox_seed);
  RESIDENT_CHECK_LAUNCH("cartpole_step");
}

}  // namespace resident::kernels
