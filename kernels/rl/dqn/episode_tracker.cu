// Episode tracker: one block of kThreads threads; thread t owns a contiguous chunk of envs, an
// exclusive scan of the per-thread ended counts places each ended episode in the ring in env
// order, and a fixed tree sums the returns in fp64. Contract in episode_tracker.h.
#include "kernels/rl/dqn/episode_tracker.h"

#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels::dqn {

namespace {

constexpr unsigned kThreads = 256;

__global__ void episode_tracker(EpisodeTrackerState state, const float* rewards,
                                const std::uint8_t* terminated, const std::uint8_t* truncated,
                                std::size_t env_count) {
  __shared__ unsigned long long offsets[kThreads];
  __shared__ double sums[kThreads];
  __shared__ unsigned long long head;
  __shared__ unsigned long long total;
  const std::size_t chunk = (env_count + kThreads - 1) / kThreads;
  const std::size_t begin = threadIdx.x * chunk;
  const std::size_t end = begin + chunk < env_count ? begin + chunk : env_count;
  if (threadIdx.x == 0) head = state.counters[kEpisodesCompleted];
  unsigned long long count = 0;
  double sum = 0.0;
  for (std::size_t n = begin; n < end; ++n) {
    const float r = __fadd_rn(state.running_return[n], rewards[n]);
    state.running_return[n] = r;
    const bool ended = (terminated != nullptr && terminated[n] != 0) ||
                       (truncated != nullptr && truncated[n] != 0);
    if (ended) {
      ++count;
      sum += static_cast<double>(r);
    }
  }
  offsets[threadIdx.x] = count;
  sums[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long running = 0;
    for (unsigned t = 0; t < kThreads; ++t) {
      const unsigned long long c = offsets[t];
      offsets[t] = running;
      running += c;
    }
    total = running;
  }
  __syncthreads();
  const std::size_t capacity = state.ring_capacity;
  unsigned long long k = offsets[threadIdx.x];
  for (std::size_t n = begin; n < end; ++n) {
    const bool ended = (terminated != nullptr && terminated[n] != 0) ||
                       (truncated != nullptr && truncated[n] != 0);
    if (!ended) continue;
    // Only the last `capacity` episodes of this step reach the ring: no two threads write a slot.
    if (k + capacity >= total) state.recent_returns[(head + k) % capacity] = state.running_return[n];
    state.running_return[n] = 0.0f;
    ++k;
  }
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    state.counters[kEpisodesCompleted] = head + total;
    state.counters[kVectorSteps] += 1;
    state.counters[kEpochEpisodes] += total;
    *state.epoch_return_sum += sums[0];
  }
}

}  // namespace

void launch_episode_tracker(const EpisodeTrackerState& state, const float* rewards,
                            const std::uint8_t* terminated, const std::uint8_t* truncated,
                            std::size_t env_count, cudaStream_t stream) {
  if (env_count == 0 || state.ring_capacity == 0)
    throw Error("launch_episode_tracker", "invalid size",
                "env_count and ring_capacity must be >= 1", __FILE__, __LINE__);
  const NvtxRange range("dqn/episode_tracker");
  episode_tracker<<<1, kThreads, 0, stream>>>(state, rewards, terminated, truncated, env_count);
  RESIDENT_CHECK_LAUNCH("episode_tracker");
}

}  // namespace resident::kernels::dqn
