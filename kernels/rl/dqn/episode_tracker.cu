// Episode tracker: one block of kThreads threads; thread t owns a contiguous chunk of envs, an
// exclusive scan of the per-thread ended counts (cub::BlockScan) places each ended episode in
// the ring in env order, and cub::BlockReduce sums the returns in fp64 (a fixed order for the
// fixed block size: deterministic). Contract in episode_tracker.h.
#include "kernels/rl/dqn/episode_tracker.h"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::dqn {

namespace {

constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    episode_tracker(EpisodeTrackerState state, const float* rewards,
                    const std::uint8_t* terminated, const std::uint8_t* truncated,
                    std::size_t env_count) {
  using BlockScan = cub::BlockScan<unsigned long long, kThreads>;
  // The algorithm named: its fp64 order is the epoch return sum's bits.
  using BlockReduce = cub::BlockReduce<double, kThreads, cub::BLOCK_REDUCE_WARP_REDUCTIONS>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  const std::size_t chunk = (env_count + kThreads - 1) / kThreads;
  const std::size_t begin = threadIdx.x * chunk;
  const std::size_t end = begin + chunk < env_count ? begin + chunk : env_count;
  const unsigned long long head = state.counters[kEpisodesCompleted];  // every thread: same value
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
  unsigned long long k = 0;
  unsigned long long total = 0;
  BlockScan(scan_storage).ExclusiveSum(count, k, total);
  const double block_sum = BlockReduce(reduce_storage).Sum(sum);  // valid in thread 0
  const std::size_t capacity = state.ring_capacity;
  for (std::size_t n = begin; n < end; ++n) {
    const bool ended = (terminated != nullptr && terminated[n] != 0) ||
                       (truncated != nullptr && truncated[n] != 0);
    if (!ended) continue;
    // Only the last `capacity` episodes of this step reach the ring: no two threads write a slot.
    if (k + capacity >= total)
      state.recent_returns[(head + k) % capacity] = state.running_return[n];
    state.running_return[n] = 0.0f;
    ++k;
  }
  __syncthreads();  // every thread has read counters[kEpisodesCompleted]
  if (threadIdx.x == 0) {
    state.counters[kEpisodesCompleted] = head + total;
    state.counters[kVectorSteps] += 1;
    state.counters[kEpochEpisodes] += total;
    *state.epoch_return_sum += block_sum;
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
