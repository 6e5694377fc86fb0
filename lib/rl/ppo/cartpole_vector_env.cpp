#include "lib/rl/ppo/cartpole_vector_env.h"

#include <cstring>
#include <string>

#include "kernels/core/error.h"

namespace resident::ppo {

namespace {

constexpr std::uint64_t kStateMagic = 0x32765f6c6f507443ull;  // "CtPol_v2"
constexpr std::size_t kHeaderWords = 2;                        // magic, env count

// The CartPoleEnv state after the header (check_state has checked the size).
std::span<const std::uint8_t> cartpole_bytes(std::span<const std::byte> state) {
  constexpr std::size_t header = kHeaderWords * sizeof(std::uint64_t);
  return {reinterpret_cast<const std::uint8_t*>(state.data()) + header, state.size() - header};
}

}  // namespace

CartPoleVectorEnv::CartPoleVectorEnv(std::size_t env_count, std::uint64_t stream_id)
    : cartpole_(env_count, stream_id) {}

void CartPoleVectorEnv::reset(std::uint64_t seed, cudaStream_t stream) {
  cartpole_.reset(seed, stream);
}

void CartPoleVectorEnv::step(const std::int32_t* actions, cudaStream_t stream) {
  cartpole_.step(actions, stream);
}

VectorEnvStep CartPoleVectorEnv::step_outputs() const {
  return {cartpole_.rewards(), cartpole_.terminated(), cartpole_.truncated(),
          cartpole_.final_observations(), cartpole_.observations()};
}

void CartPoleVectorEnv::collect_episode_stats(cudaStream_t stream) {
  cartpole_.collect_episode_stats(stream, /*clear=*/true);
}

std::vector<std::byte> CartPoleVectorEnv::save_state(cudaStream_t stream) const {
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream));  // the state after the work on `stream`
  const std::vector<std::uint8_t> cartpole = cartpole_.save_state();
  const std::uint64_t header[kHeaderWords] = {kStateMagic, cartpole_.env_count()};
  std::vector<std::byte> out(sizeof header + cartpole.size());
  std::memcpy(out.data(), header, sizeof header);
  std::memcpy(out.data() + sizeof header, cartpole.data(), cartpole.size());
  return out;
}

void CartPoleVectorEnv::check_state(std::span<const std::byte> state) const {
  std::uint64_t header[kHeaderWords] = {};
  if (state.size() >= sizeof header) std::memcpy(header, state.data(), sizeof header);
  if (state.size() < sizeof header || header[0] != kStateMagic)
    throw Error("CartPoleVectorEnv::load_state", "checkpoint mismatch",
                "env state of " + std::to_string(state.size()) +
                    " bytes is not a CartPoleVectorEnv state (bad size or magic)",
                __FILE__, __LINE__);
  if (header[1] != cartpole_.env_count())
    throw Error("CartPoleVectorEnv::load_state", "checkpoint mismatch",
                "state of " + std::to_string(header[1]) + " envs; this env has " +
                    std::to_string(cartpole_.env_count()),
                __FILE__, __LINE__);
  // The records themselves: staged (checked) and dropped, nothing applied.
  (void)const_cast<env::CartPoleEnv&>(cartpole_).stage_state(cartpole_bytes(state));
}

void CartPoleVectorEnv::load_state(std::span<const std::byte> state, cudaStream_t stream) {
  check_state(state);
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream));  // nothing queued may see half a state
  cartpole_.load_state(cartpole_bytes(state));
}

}  // namespace resident::ppo
