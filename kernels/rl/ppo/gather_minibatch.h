// Gathers one minibatch of the rollout through the permutation (kernels/rl/ppo/gather_minibatch.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::ppo {

// The per-sample arrays of the rollout, flat over its S = T * N samples (sample j = t * N + n).
struct SampleArrays {
  const float* observations = nullptr;  // [S, D]
  const std::int32_t* actions = nullptr;
  const float* log_prob = nullptr;
  const float* advantages = nullptr;
  const float* returns = nullptr;
  const float* values = nullptr;
};

// One minibatch, [B] or [B, D], overwritten.
struct Minibatch {
  float* observations = nullptr;
  std::int32_t* actions = nullptr;
  float* log_prob = nullptr;
  float* advantages = nullptr;
  float* returns = nullptr;
  float* values = nullptr;
};

// Row i of the minibatch is sample permutation[m * B + i] with m = *counter % minibatches (the
// counter counts minibatch updates; only read here). One thread per (row, component); overwrite;
// deterministic; capturable.
void launch_gather_minibatch(Minibatch out, SampleArrays samples, const std::uint32_t* permutation,
                             std::size_t batch, std::size_t observation_size,
                             std::size_t minibatches, const std::uint64_t* counter,
                             cudaStream_t stream);

}  // namespace resident::kernels::ppo
