// The acting half of a DQN collection step in one kernel (kernels/rl/dqn/dqn_act_fused.cu): the
// online Q-network's forward over the N envs' observations and the epsilon-greedy choice. On the
// GEMM path that is a GEMM and a bias-activation launch per layer and an epsilon-greedy launch
// (~7 launches for 64-256-256-3); this is one, its layers separated by barriers of all its blocks
// (kernels/nn/fused_step_phases.cuh's forward tiles and output dots): one thread-block cluster
// with cluster barriers when the grid has at most kMostClusterBlocks blocks (the bench's 32 x
// 64-256-256-3: 8), else a cooperative launch with grid barriers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/nn/mlp_train_step_fused.h"
#include "kernels/rl/dqn/epsilon_greedy.h"

namespace resident::kernels::dqn {

// The largest grid launched as one cluster (the portable cluster size).
inline constexpr unsigned kMostClusterBlocks = 8;

struct DqnActExploration {
  EpsilonSchedule schedule{};
  const std::uint64_t* vector_step = nullptr;  // device; read, not advanced
  std::uint64_t philox_seed = 0;
};

// The grid of a launch for these widths ({obs, hidden..., A}: fused_step_supports) and N envs
// (setup: device queries only). Throws resident::Error for unsupported widths, N = 0 or a device
// without cooperative launches.
unsigned dqn_act_fused_grid(std::span<const std::size_t> widths, std::size_t env_count,
                            const Activation& hidden_activation);

// q_values [N, A] = the network's outputs on observations [N, widths[0]] (z_l = a_{l-1} W_l^T +
// b_l, a_l = f(z_l) for hidden l, the last layer linear; hidden z and a written to
// scratch.pre_activations/activations [N, widths[l + 1]]), then actions [N] by
// launch_epsilon_greedy's rule on those Q-values (the same Philox draws, epsilon at
// *vector_step * N). Everything listed is overwritten. Q-values equal the GEMM path's to
// rounding (each a fixed-order fp32 sum: reproducible for a given grid), so a greedy choice can
// differ from it only between Q-values within rounding of each other. Only the network's
// weights, biases and hidden activation are read (its grad views may be null). `grid` from
// dqn_act_fused_grid (a grid of at most kMostClusterBlocks runs as one cluster, launched after
// the prior kernel of the stream; a larger one cooperatively). Graph-capturable; throws
// resident::Error naming the value and the limit on invalid arguments.
void launch_dqn_act_fused(std::int32_t* actions, float* q_values, const FusedStepMlp& online,
                          const FusedStepScratch& scratch, const float* observations,
                          std::size_t env_count, const DqnActExploration& exploration,
                          unsigned grid, cudaStream_t stream);

}  // namespace resident::kernels::dqn
