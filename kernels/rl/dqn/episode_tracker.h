// Device-side episode statistics of a vector env (kernels/rl/dqn/episode_tracker.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::dqn {

// Indices into EpisodeTrackerState::counters.
inline constexpr std::size_t kEpisodesCompleted = 0;  // episodes ended, ever (the ring's head)
inline constexpr std::size_t kVectorSteps = 1;        // tracker calls = vector-env steps done
inline constexpr std::size_t kEpochEpisodes = 2;      // episodes ended since the epoch summary
inline constexpr std::size_t kTrackerCounterCount = 3;

struct EpisodeTrackerState {
  float* running_return = nullptr;    // [N] return of each env's current episode so far
  float* recent_returns = nullptr;    // [R] ring: episode k (0-based, in completion order) at k % R
  std::uint64_t* counters = nullptr;  // [kTrackerCounterCount]
  double* epoch_return_sum = nullptr;  // [1] returns of the episodes ended since the summary
  std::size_t ring_capacity = 1;      // R >= 1
};

// After one env step with rewards [N] and the end flags terminated/truncated [N] (either may be
// null = never): running_return[n] += rewards[n] (float); every env whose episode ended appends
// that return to the ring (in env order) and restarts at 0; the counters advance
// (kVectorSteps by 1, the episode counters by the ended count) and epoch_return_sum adds the
// ended returns (fp64, cub::BlockReduce: a fixed order). One block: deterministic, no atomics.
// Run it once per collection step after everything that reads counters[kVectorSteps]
// (epsilon-greedy).
void launch_episode_tracker(const EpisodeTrackerState& state, const float* rewards,
                            const std::uint8_t* terminated, const std::uint8_t* truncated,
                            std::size_t env_count, cudaStream_t stream);

}  // namespace resident::kernels::dqn
