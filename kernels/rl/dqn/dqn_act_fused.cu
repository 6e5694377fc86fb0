// The fused DQN acting step (contract in dqn_act_fused.h). One kernel of kThreads-thread blocks
// (kernels/nn/fused_step_phases.cuh), its layers separated by a barrier of all its blocks: a
// cluster barrier when the grid is one thread-block cluster (at most kMostClusterBlocks blocks),
// else a grid barrier of a cooperative launch:
//   forward l = 1 .. L-1  the hidden layers' 32 x 32 tiles over the N rows, the barrier after
//                         each (the next layer reads every block's tiles through L2; the
//                         barrier's release/acquire at cluster or grid scope orders them)
//   head                  8-row tiles, one warp per row: lane o < A computes Q(o) (output dots
//                         plus bias), writes it, and lane 0 picks the row's action with
//                         epsilon_greedy_action (the separate kernel's function)
#include "kernels/rl/dqn/dqn_act_fused.h"

#include <cooperative_groups.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/nn/fused_step_phases.cuh"
#include "kernels/rl/dqn/epsilon_greedy_action.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::dqn {

namespace {

namespace cg = cooperative_groups;
using namespace fused_step;

struct ActArgs {
  std::int32_t* actions;
  float* q_values;
  FusedStepMlp online;
  FusedStepScratch scratch;
  const float* observations;
  int rows;  // N
  DqnActExploration exploration;
  bool one_cluster;  // the grid is one cluster: cluster barriers; else cooperative: grid barriers
};

template <ActivationKind Kind>
__global__ void __launch_bounds__(kThreads, 1) dqn_act_fused(const __grid_constant__ ActArgs p) {
  begin_after_prior_kernel();
  __shared__ Chunks chunks;
  __shared__ float q_rows[kHeadRows][kMaxOut];
  cg::grid_group grid = cg::this_grid();
  const int L = static_cast<int>(p.online.layers);
  const Pass pass{&p.online, &p.scratch, p.observations, p.rows};
  for (int l = 1; l < L; ++l) {
    const int tiles = forward_tiles(pass, l);
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) forward_tile<Kind>(chunks, pass, l, t);
    if (p.one_cluster)
      cg::this_cluster().sync();
    else
      grid.sync();
  }
  const std::uint64_t step = *p.exploration.vector_step;
  const double epsilon =
      epsilon_at(p.exploration.schedule, step * static_cast<std::uint64_t>(p.rows));
  const int in = static_cast<int>(p.online.widths[L - 1]);
  const int actions = static_cast<int>(p.online.widths[L]);
  const float* hidden = p.scratch.activations[L - 2];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int head_tiles = (p.rows + kHeadRows - 1) / kHeadRows;
  for (int t = blockIdx.x; t < head_tiles; t += gridDim.x) {
    const int row = t * kHeadRows + warp;
    if (row >= p.rows) continue;  // warp-uniform
    const float bias = lane < actions ? p.online.biases[L - 1][lane] : 0.0f;
    const float q = warp_output_dots(hidden + static_cast<std::size_t>(row) * in,
                                     p.online.weights[L - 1], in, actions) + bias;
    if (lane < actions) {
      q_rows[warp][lane] = q;
      p.q_values[static_cast<std::size_t>(row) * actions + lane] = q;
    }
    __syncwarp();
    if (lane == 0)
      p.actions[row] = epsilon_greedy_action(q_rows[warp], static_cast<std::size_t>(actions),
                                             epsilon, p.exploration.philox_seed, step,
                                             static_cast<std::size_t>(row));
    __syncwarp();  // the row's Q-values are read before the warp's next row overwrites them
  }
}

template <typename Launch>
void with_kernel(const Activation& activation, const char* op, Launch&& launch) {
  activation_math::dispatch(activation, op, [&](auto kind) {
    launch(&dqn_act_fused<decltype(kind)::value>);
  });
}

// The most tiles any phase hands out.
std::size_t max_phase_tiles(std::span<const std::size_t> w, std::size_t rows) {
  std::size_t most = head_tiles_on_host(rows);
  for (std::size_t l = 1; l + 1 < w.size(); ++l) most = std::max(most, tiles_on_host(rows, w[l]));
  return most;
}

}  // namespace

unsigned dqn_act_fused_grid(std::span<const std::size_t> widths, std::size_t env_count,
                            const Activation& hidden_activation) {
  const char* op = "dqn_act_fused_grid";
  if (env_count == 0)
    throw Error(op, "invalid argument", "env_count = 0, must be >= 1", __FILE__, __LINE__);
  require_supported(op, widths, env_count);
  unsigned grid = 0;
  with_kernel(hidden_activation, op, [&](auto kernel) {
    grid = cooperative_grid(kernel, max_phase_tiles(widths, env_count), op);
  });
  return grid;
}

void launch_dqn_act_fused(std::int32_t* actions, float* q_values, const FusedStepMlp& online,
                          const FusedStepScratch& scratch, const float* observations,
                          std::size_t env_count, const DqnActExploration& exploration,
                          unsigned grid, cudaStream_t stream) {
  const char* op = "launch_dqn_act_fused";
  const NvtxRange range("dqn/act_fused");
  const auto fail = [op](const std::string& detail, int line) {
    throw Error(op, "invalid argument", detail, __FILE__, line);
  };
  check_fused_network(op, online, scratch, /*with_grads=*/false);
  if (env_count == 0 || env_count > (1u << 24))
    fail("env_count = " + std::to_string(env_count) + ", allowed 1 to 2^24", __LINE__);
  if (grid == 0) fail("grid = 0 (use dqn_act_fused_grid)", __LINE__);
  if (actions == nullptr || q_values == nullptr || observations == nullptr)
    fail(std::string(actions == nullptr ? "actions" : q_values == nullptr ? "q_values" : "observations") +
             " is null", __LINE__);
  if (exploration.vector_step == nullptr) fail("vector_step is null", __LINE__);
  const bool one_cluster = grid <= kMostClusterBlocks;
  const ActArgs args{actions, q_values, online, scratch, observations, static_cast<int>(env_count),
                     exploration, one_cluster};
  with_kernel(online.hidden_activation, op, [&](auto kernel) {
    if (one_cluster)
      launch_after_prior({dim3(grid), dim3(kThreads), 0, /*cooperative=*/false, grid}, stream,
                         kernel, args);
    else
      launch_cooperative(kernel, grid, args, stream);
  });
}

}  // namespace resident::kernels::dqn
