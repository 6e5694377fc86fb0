#include "lib/env/cartpole_env.h"

#include "kernels/env/cartpole_step.h"
#include "kernels/env/episode_stats.h"
#include "kernels/core/error.h"
#include "kernels/core/philox.h"

namespace resident::env {

namespace {

constexpr std::size_t kStateFloats = 6;

std::size_t checked_env_count(std::size_t env_count) {
  if (env_count == 0)
    throw Error("CartPoleEnv", "invalid config", "env_count = 0, allowed >= 1", __FILE__, __LINE__);
  return env_count;
}

}  // namespace

CartPoleEnv::CartPoleEnv(std::size_t env_count, std::uint64_t stream_id)
    : env_count_(checked_env_count(env_count)),
      stream_id_(stream_id),
      state_floats_(kStateFloats * env_count),
      elapsed_steps_(env_count),
      completed_episodes_(env_count),
      philox_block_(1),
      step_ticket_(1),
      observations_(kObservationSize * env_count),
      rewards_(env_count),
      terminated_(env_count),
      truncated_(env_count),
      final_observations_(kObservationSize * env_count),
      return_sum_(1),
      episode_count_(1) {
  // Setup, not the hot path: the step's ticket starts at 0 (reset sets it too; a state loaded
  // into an env that was never reset needs it as well).
  RESIDENT_CUDA_CHECK(cudaMemset(step_ticket_.data(), 0, step_ticket_.bytes()));
}

kernels::CartPoleDeviceState CartPoleEnv::device_state() noexcept {
  kernels::CartPoleDeviceState state;
  float* f = state_floats_.data();
  state.x = f;
  state.x_dot = f + env_count_;
  state.theta = f + 2 * env_count_;
  state.theta_dot = f + 3 * env_count_;
  state.episode_return = f + 4 * env_count_;
  state.completed_return_sum = f + 5 * env_count_;
  state.elapsed_steps = elapsed_steps_.data();
  state.completed_episodes = completed_episodes_.data();
  state.philox_block = philox_block_.data();
  state.step_ticket = step_ticket_.data();
  return state;
}

void CartPoleEnv::reset(std::uint64_t seed, cudaStream_t stream) {
  philox_seed_ = mix_seed(seed, stream_id_);
  const kernels::CartPoleDeviceState state = device_state();
  kernels::launch_cartpole_reset(observations_.data(), state, env_count_, philox_seed_, stream);
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(return_sum_.data(), 0, return_sum_.bytes(), stream));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(episode_count_.data(), 0, episode_count_.bytes(), stream));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(rewards_.data(), 0, rewards_.bytes(), stream));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(terminated_.data(), 0, terminated_.bytes(), stream));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(truncated_.data(), 0, truncated_.bytes(), stream));
  RESIDENT_CUDA_CHECK(  // all-ones bytes: NaN
      cudaMemsetAsync(final_observations_.data(), 0xff, final_observations_.bytes(), stream));
}

void CartPoleEnv::step(const std::int32_t* actions, cudaStream_t stream) {
  const kernels::CartPoleDeviceState state = device_state();
  const kernels::CartPoleStepOutputs outputs{observations_.data(), rewards_.data(),
                                             terminated_.data(), truncated_.data(),
                                             final_observations_.data()};
  kernels::launch_cartpole_step(outputs, state, actions, env_count_, philox_seed_, stream);
}

void CartPoleEnv::collect_episode_stats(cudaStream_t stream, bool clear) {
  const kernels::CartPoleDeviceState state = device_state();
  kernels::launch_episode_stats(return_sum_.data(), episode_count_.data(),
                                state.completed_return_sum, state.completed_episodes, env_count_,
                                clear, stream);
}

std::vector<std::uint8_t> CartPoleEnv::save_state() const {
  DeviceStateWriter w;
  const std::uint64_t seed[1] = {philox_seed_};
  w.add_host(std::span<const std::uint64_t>(seed))
      .add(state_floats_)
      .add(elapsed_steps_)
      .add(completed_episodes_)
      .add(philox_block_)
      .add(observations_)
      .add(rewards_)
      .add(terminated_)
      .add(truncated_)
      .add(final_observations_)
      .add(return_sum_)
      .add(episode_count_);
  return w.take();
}

DeviceStateReader CartPoleEnv::stage_state(std::span<const std::uint8_t> bytes) {
  DeviceStateReader r(bytes, "CartPoleEnv::load_state");
  const std::uint64_t seed = r.next<std::uint64_t>(1, "philox seed")[0];
  r.into(state_floats_, "state")
      .into(elapsed_steps_, "elapsed steps")
      .into(completed_episodes_, "completed episodes")
      .into(philox_block_, "philox block")
      .into(observations_, "observations")
      .into(rewards_, "rewards")
      .into(terminated_, "terminated")
      .into(truncated_, "truncated")
      .into(final_observations_, "final observations")
      .into(return_sum_, "episode return sum")
      .into(episode_count_, "episode count")
      .then([this, seed] { philox_seed_ = seed; });
  r.check_consumed();
  return r;
}

}  // namespace resident::env
