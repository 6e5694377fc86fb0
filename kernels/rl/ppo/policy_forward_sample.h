// The rollout's policy forward and action sampling in one launch
// (kernels/rl/ppo/policy_forward_sample.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/nn/activation.h"
#include "kernels/nn/mlp_forward_fused.h"
#include "kernels/rl/ppo/sample_actions.h"

namespace resident::kernels::ppo {

// launch_fused_mlp_forward(policy, observations, rows, hidden) followed by
// launch_sample_actions(actions, store, logits, rows, A, philox_seed, counter), where logits =
// policy.layer[last].pre_activation [rows, A] and A = policy.widths[layers]: the same outputs,
// bit for bit (the same device code, per 32-row tile after the tile's forward), in one launch
// instead of two. Overwrites the forward's outputs, actions [rows] and, with `store`, row
// *counter % T of its arrays and *store.step_slot = *counter (the counter is only read).
// Deterministic; no atomics, no allocation, no host synchronization; capturable. Throws
// resident::Error naming launch_policy_forward_sample for what the forward's launcher refuses,
// for steps == 0, a store with only one of actions / log_prob, or a null actions or counter.
void launch_policy_forward_sample(const FusedMlp& policy, const float* observations,
                                  std::size_t rows, const Activation& hidden,
                                  std::int32_t* actions, SampleStore store,
                                  std::uint64_t philox_seed, const std::uint64_t* counter,
                                  cudaStream_t stream);

}  // namespace resident::kernels::ppo
