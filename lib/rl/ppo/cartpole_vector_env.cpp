#include "lib/rl/ppo/cartpole_vector_env.h"

#include <cstring>
#include <string>

#include "kernels/env/episode_stats.h"
#include "lib/core/error.h"
#include "lib/core/philox.h"

namespace resident::ppo {

namespace {

constexpr std::size_t kStateFloats = 6;
constexpr std::uint64_t kStateMagic = 0x31765f6c6f507443ull;  // "CtPol_v1"

std::size_t checked(std::size_t env_count) {
  if (env_count == 0)
    throw Error("CartPoleVectorEnv", "invalid config", "env_count = 0, allowed >= 1", __FILE__,
                __LINE__);
  return env_count;
}

// Blocking copies ordered after the work on `stream` (checkpoint phase).
void to_host(void* host, const void* device, std::size_t bytes, cudaStream_t stream) {
  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream));
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace

CartPoleVectorEnv::CartPoleVectorEnv(std::size_t env_count, std::uint64_t stream_id)
    : env_count_(checked(env_count)),
      stream_id_(stream_id),
      state_floats_(kStateFloats * env_count),
      elapsed_steps_(env_count),
      completed_episodes_(env_count),
      philox_block_(1),
      observations_(kernels::kCartPoleObservationSize * env_count),
      rewards_(env_count),
      final_observations_(kernels::kCartPoleObservationSize * env_count),
      terminated_(env_count),
      truncated_(env_count),
      return_sum_(1),
      episode_count_(1) {}

kernels::CartPoleDeviceState CartPoleVectorEnv::device_state() const noexcept {
  kernels::CartPoleDeviceState s;
  float* f = const_cast<float*>(state_floats_.data());
  s.x = f;
  s.x_dot = f + env_count_;
  s.theta = f + 2 * env_count_;
  s.theta_dot = f + 3 * env_count_;
  s.episode_return = f + 4 * env_count_;
  s.completed_return_sum = f + 5 * env_count_;
  s.elapsed_steps = const_cast<std::int32_t*>(elapsed_steps_.data());
  s.completed_episodes = const_cast<std::uint32_t*>(completed_episodes_.data());
  s.philox_block = const_cast<std::uint64_t*>(philox_block_.data());
  return s;
}

void CartPoleVectorEnv::reset(std::uint64_t seed, cudaStream_t stream) {
  philox_seed_ = mix_seed(seed, stream_id_);
  kernels::launch_cartpole_reset(observations_.data(), device_state(), env_count_, philox_seed_,
                                 stream);
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(return_sum_.data(), 0, return_sum_.bytes(), stream));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(episode_count_.data(), 0, episode_count_.bytes(), stream));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(rewards_.data(), 0, rewards_.bytes(), stream));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(terminated_.data(), 0, terminated_.bytes(), stream));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(truncated_.data(), 0, truncated_.bytes(), stream));
  RESIDENT_CUDA_CHECK(
      cudaMemsetAsync(final_observations_.data(), 0xff, final_observations_.bytes(), stream));
}

void CartPoleVectorEnv::step(const std::int32_t* actions, cudaStream_t stream) {
  const kernels::CartPoleStepOutputs outputs{observations_.data(), rewards_.data(),
                                             terminated_.data(), truncated_.data(),
                                             final_observations_.data()};
  kernels::launch_cartpole_step(outputs, device_state(), actions, env_count_, philox_seed_,
                                stream);
}

kernels::ppo::EnvStepOutputs CartPoleVectorEnv::step_outputs() const {
  return {rewards_.data(), terminated_.data(), truncated_.data(), final_observations_.data(),
          observations_.data()};
}

void CartPoleVectorEnv::collect_episode_stats(cudaStream_t stream) {
  const kernels::CartPoleDeviceState s = device_state();
  kernels::launch_episode_stats(return_sum_.data(), episode_count_.data(),
                                s.completed_return_sum, s.completed_episodes, env_count_,
                                /*clear=*/true, stream);
}

// Layout: magic, env count, philox seed (u64 each), then state floats [6N], elapsed [N],
// completed episodes [N], philox block [1], observations [4N].
std::size_t CartPoleVectorEnv::state_bytes() const noexcept {
  return 3 * sizeof(std::uint64_t) + state_floats_.bytes() + elapsed_steps_.bytes() +
         completed_episodes_.bytes() + philox_block_.bytes() + observations_.bytes();
}

std::vector<std::byte> CartPoleVectorEnv::save_state(cudaStream_t stream) const {
  std::vector<std::byte> out(state_bytes());
  std::byte* p = out.data();
  const std::uint64_t header[3] = {kStateMagic, env_count_, philox_seed_};
  std::memcpy(p, header, sizeof header);
  p += sizeof header;
  auto take = [&](const auto& buffer) {
    to_host(p, buffer.data(), buffer.bytes(), stream);
    p += buffer.bytes();
  };
  take(state_floats_);
  take(elapsed_steps_);
  take(completed_episodes_);
  take(philox_block_);
  take(observations_);
  return out;
}

void CartPoleVectorEnv::check_state(std::span<const std::byte> state) const {
  std::uint64_t header[3] = {0, 0, 0};
  if (state.size() >= sizeof header) std::memcpy(header, state.data(), sizeof header);
  if (state.size() != state_bytes() || header[0] != kStateMagic || header[1] != env_count_)
    throw Error("CartPoleVectorEnv::load_state", "checkpoint mismatch",
                "env state of " + std::to_string(state.size()) + " bytes for " +
                    std::to_string(header[1]) + " envs; this env needs " +
                    std::to_string(state_bytes()) + " bytes for " + std::to_string(env_count_),
                __FILE__, __LINE__);
}

void CartPoleVectorEnv::load_state(std::span<const std::byte> state, cudaStream_t stream) {
  check_state(state);
  std::uint64_t header[3];
  std::memcpy(header, state.data(), sizeof header);
  philox_seed_ = header[2];
  const std::byte* p = state.data() + sizeof header;
  auto put = [&](auto& buffer) {
    RESIDENT_CUDA_CHECK(
        cudaMemcpyAsync(buffer.data(), p, buffer.bytes(), cudaMemcpyHostToDevice, stream));
    p += buffer.bytes();
  };
  put(state_floats_);
  put(elapsed_steps_);
  put(completed_episodes_);
  put(philox_block_);
  put(observations_);
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host source must outlive the copies
}

}  // namespace resident::ppo
