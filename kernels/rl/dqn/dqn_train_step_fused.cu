// The fused DQN gradient step (contract in dqn_train_step_fused.h). One cooperative kernel of
// kThreads-thread blocks, phases separated by grid barriers (kernels/nn/fused_step_phases.cuh):
//   forward l = 1 .. L-1  the online network's tiles over the 2B rows [states; next_states] and
//                         the target network's over the B next states, in one phase
//   head                  8-row tiles, one warp per row: Q(s), Q(s') and Q_target(s') (lane o
//                         holds action o), the double-DQN target, TD error and Huber terms by
//                         lane 0 with dqn_loss_head's operations, dL/dq, the tile's loss partial,
//                         and dz_{L-1} = (dL/dq W_L) f'(z_{L-1}) of the states' rows
//   backward l = L-1 .. 1 the online network over the B states (backward_phases)
//   optimizer             norm, clip and AdamW over the online slab (optimizer_phase), then, on an
//                         update step, the target params of the same elements (each thread
//                         reads back the online params it just wrote); block 0 writes the loss
//                         (tile partials in order, / B in double), the norm, step + 1, scale 1.
#include "kernels/rl/dqn/dqn_train_step_fused.h"

#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/nn/fused_step_phases.cuh"
#include "kernels/nn/huber.cuh"
#include "kernels/rl/dqn/greedy_action.cuh"
#include "kernels/rl/dqn/target_update_element.cuh"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels::dqn {

namespace {

namespace cg = cooperative_groups;
using namespace fused_step;

struct Args {
  DqnFusedOutputs out;
  FusedStepMlp online;
  FusedStepScratch online_scratch;
  DqnFusedTarget target;
  FusedStepOptimizer opt;
  DqnFusedBatch batch;
  int rows;          // B
  DqnFusedConstants c;
  float grad_scale;  // 1 / B, rounded once from fp64
};

// Q-values of one head row, per warp: [0] Q(s), [1] Q(s'), [2] Q_target(s').
using HeadRows = float[kHeadRows][3][kMaxOut];

template <ActivationKind Kind>
__device__ void dqn_head_tile(const Args& p, int t, HeadRows& q_rows,
                              float (*head_dy)[kMaxOut], float* head_loss) {
  const int L = static_cast<int>(p.online.layers);
  const int in = static_cast<int>(p.online.widths[L - 1]);
  const int actions = static_cast<int>(p.online.widths[L]);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = t * kHeadRows + warp;
  const float* w = p.online.weights[L - 1];
  float row_loss = 0.0f;
  if (row < p.rows) {
    float online_bias = 0.0f, target_bias = 0.0f;
    if (lane < actions) {
      online_bias = p.online.biases[L - 1][lane];
      target_bias = p.target.network.biases[L - 1][lane];
    }
    std::int32_t action = 0;
    float reward = 0.0f, weight = 1.0f;
    std::uint8_t done = 0;
    if (lane == 0) {
      action = p.batch.actions[row];
      reward = p.batch.rewards[row];
      done = p.batch.dones[row];
      if (p.batch.is_weights != nullptr) weight = p.batch.is_weights[row];
    }
    const std::size_t base = static_cast<std::size_t>(row) * in;
    const float* online_a = p.online_scratch.activations[L - 2];
    const float q = warp_output_dots(online_a + base, w, in, actions) + online_bias;
    const float q_next = warp_output_dots(online_a + static_cast<std::size_t>(p.rows) * in + base,
                                          w, in, actions) + online_bias;
    const float q_target = warp_output_dots(p.target.scratch.activations[L - 2] + base,
                                            p.target.network.weights[L - 1], in, actions) +
                           target_bias;
    if (lane < actions) {
      q_rows[warp][0][lane] = q;
      q_rows[warp][1][lane] = q_next;
      q_rows[warp][2][lane] = q_target;
    }
    __syncwarp();
    float grad = 0.0f;
    int taken = -1;
    if (lane == 0) {
      const std::size_t best = greedy_action(q_rows[warp][1], static_cast<std::size_t>(actions));
      const float bootstrap = done != 0 ? 0.0f : __fmul_rn(p.c.discount, q_rows[warp][2][best]);
      const float target = __fadd_rn(__fmul_rn(p.c.reward_scale, reward), bootstrap);
      const bool valid = action >= 0 && action < actions;
      const float q_taken = valid ? q_rows[warp][0][action] : __int_as_float(0x7fc00000);
      p.out.td_errors[row] = __fsub_rn(target, q_taken);
      const float d = q_taken - target;
      row_loss = weight * huber::value(d, p.c.delta);
      const float scale = p.batch.is_weights != nullptr ? p.grad_scale * weight : p.grad_scale;
      grad = scale * huber::derivative(d, p.c.delta);
      taken = valid ? action : -1;
    }
    grad = __shfl_sync(0xffffffffu, grad, 0);
    taken = __shfl_sync(0xffffffffu, taken, 0);
    if (lane < actions) {
      const float g = lane == taken ? grad : 0.0f;
      p.online_scratch.d_pre_activations[L - 1][static_cast<std::size_t>(row) * actions + lane] = g;
      head_dy[warp][lane] = g;
    }
    __syncwarp();
    warp_head_backward<Kind>(p.online_scratch.d_pre_activations[L - 2] + base, head_dy[warp], w,
                             p.online_scratch.pre_activations[L - 2] + base, in, actions,
                             p.online.hidden_activation);
  }
  finish_head_tile(row_loss, head_loss, p.online_scratch.loss_partials, t);  // then q_rows is free
}

// The target params of this thread's AdamW share (update_range's elements), from the online
// params it has just written.
__device__ void update_target_share(const Args& p, std::size_t first) {
  const std::size_t n = p.opt.n, groups = n / 4, stride = std::size_t{gridDim.x} * kThreads;
  const float tau = p.target.tau;
  const auto* online4 = reinterpret_cast<const float4*>(p.opt.params);
  auto* target4 = reinterpret_cast<float4*>(p.target.params);
  for (std::size_t i = first; i < groups; i += stride) {
    const float4 o = online4[i];
    float4 t = target4[i];
    t.x = updated_target(t.x, o.x, tau);
    t.y = updated_target(t.y, o.y, tau);
    t.z = updated_target(t.z, o.z, tau);
    t.w = updated_target(t.w, o.w, tau);
    target4[i] = t;
  }
  const std::size_t tail = groups * 4 + first;
  if (tail < n) p.target.params[tail] = updated_target(p.target.params[tail], p.opt.params[tail], tau);
}

template <ActivationKind Kind>
__global__ void __launch_bounds__(kThreads) dqn_train_step_fused(const __grid_constant__ Args p) {
  begin_after_prior_kernel();
  __shared__ Chunks chunks;
  __shared__ HeadRows q_rows;
  __shared__ float head_dy[kHeadRows][kMaxOut];
  __shared__ float head_loss[kHeadRows];
  __shared__ BlockSum::TempStorage reduce_temp;
  __shared__ adamw_detail::StepFactors factors;
  cg::grid_group grid = cg::this_grid();
  const int L = static_cast<int>(p.online.layers);
  const std::size_t observation = p.online.widths[0];
  const Pass online_both{&p.online, &p.online_scratch, p.batch.states, 2 * p.rows};
  const Pass target_next{&p.target.network, &p.target.scratch,
                         p.batch.states + static_cast<std::size_t>(p.rows) * observation, p.rows};
  const Pass online_states{&p.online, &p.online_scratch, p.batch.states, p.rows};
  const std::uint64_t step = *p.opt.step;  // before the first barrier; block 0 writes it last
  if (threadIdx.x == 0) factors = adamw_detail::step_factors(p.opt.constants, step, 1.0f);
  PhaseClock clock{p.online_scratch.phase_times};
  clock.mark();

  for (int l = 1; l < L; ++l) {
    const int online_tiles = forward_tiles(online_both, l);
    const int tiles = online_tiles + forward_tiles(target_next, l);
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      if (t < online_tiles)
        forward_tile<Kind>(chunks, online_both, l, t);
      else
        forward_tile<Kind>(chunks, target_next, l, t - online_tiles);
    }
    grid.sync();
    clock.mark();
  }
  const int head_tiles = (p.rows + kHeadRows - 1) / kHeadRows;
  for (int t = blockIdx.x; t < head_tiles; t += gridDim.x)
    dqn_head_tile<Kind>(p, t, q_rows, head_dy, head_loss);
  grid.sync();
  clock.mark();

  FirstGroup first;
  const float norm =
      backward_and_optimizer<Kind>(chunks, grid, online_states, p.opt,
                                   p.online_scratch.norm_partials, reduce_temp, factors, clock, first);
  if ((step + 1) % p.target.period == 0) update_target_share(p, first.index);
  finish_step(p.online_scratch, p.out.loss, static_cast<double>(p.rows), head_tiles, p.opt, step,
              norm, clock);
}

template <typename Launch>
void with_kernel(const Activation& activation, const char* op, Launch&& launch) {
  activation_math::dispatch(activation, op, [&](auto kind) {
    launch(&dqn_train_step_fused<decltype(kind)::value>);
  });
}

// The most tiles any phase hands out.
std::size_t max_phase_tiles(std::span<const std::size_t> w, std::size_t batch) {
  std::size_t most = std::max(head_tiles_on_host(batch), most_backward_tiles(w, batch));
  for (std::size_t l = 1; l + 1 < w.size(); ++l)
    most = std::max(most, tiles_on_host(2 * batch, w[l]) + tiles_on_host(batch, w[l]));
  return most;
}

}  // namespace

unsigned dqn_fused_step_grid(std::span<const std::size_t> widths, std::size_t batch,
                             const Activation& hidden_activation) {
  const char* op = "dqn_fused_step_grid";
  require_supported(op, widths, batch);
  unsigned grid = 0;
  with_kernel(hidden_activation, op, [&](auto kernel) {
    grid = cooperative_grid(kernel, max_phase_tiles(widths, batch), op);
  });
  return grid;
}

void launch_dqn_train_step_fused(const DqnFusedOutputs& out, const FusedStepMlp& online,
                                 const FusedStepScratch& online_scratch,
                                 const DqnFusedTarget& target, const FusedStepOptimizer& optimizer,
                                 const DqnFusedBatch& batch, std::size_t batch_size,
                                 const DqnFusedConstants& constants, unsigned grid,
                                 cudaStream_t stream) {
  const char* op = "launch_dqn_train_step_fused";
  const NvtxRange range("dqn/train_step_fused");
  check_fused_step_views(op, online, online_scratch, optimizer, batch_size, grid);
  const auto fail = [op](const std::string& detail, int line) {
    throw Error(op, "invalid argument", detail, __FILE__, line);
  };
  if (target.network.layers != online.layers)
    fail("the target network has " + std::to_string(target.network.layers) +
             " layers, the online one " + std::to_string(online.layers), __LINE__);
  for (std::size_t l = 0; l <= online.layers; ++l)
    if (target.network.widths[l] != online.widths[l])
      fail("width " + std::to_string(l) + " of the target network is " +
               std::to_string(target.network.widths[l]) + ", the online one's " +
               std::to_string(online.widths[l]), __LINE__);
  for (std::size_t l = 0; l < online.layers; ++l) {
    if (target.network.weights[l] == nullptr || target.network.biases[l] == nullptr)
      fail("target layer " + std::to_string(l) + ": a weight or bias view is null", __LINE__);
    if (l + 1 < online.layers &&
        (target.scratch.pre_activations[l] == nullptr || target.scratch.activations[l] == nullptr))
      fail("target hidden layer " + std::to_string(l) + ": a z or a scratch view is null", __LINE__);
  }
  const Activation& f = online.hidden_activation;
  const Activation& g = target.network.hidden_activation;
  if (g.kind != f.kind || g.elu_alpha != f.elu_alpha || g.softplus_beta != f.softplus_beta ||
      g.softplus_threshold != f.softplus_threshold)
    fail("the target network's hidden activation differs from the online network's", __LINE__);
  if (target.params == nullptr || reinterpret_cast<std::uintptr_t>(target.params) % 16 != 0)
    fail("target params are null or not 16-byte aligned", __LINE__);
  if (target.params == optimizer.params)
    fail("target params alias the online params (two slabs are required)", __LINE__);
  if (!(target.tau > 0.0f && target.tau <= 1.0f))
    fail("tau = " + std::to_string(target.tau) + ", allowed (0, 1]", __LINE__);
  if (target.period == 0) fail("period = 0, allowed >= 1", __LINE__);
  if (!(constants.delta > 0.0f) || !std::isfinite(constants.delta))
    fail("delta = " + std::to_string(constants.delta) + ", allowed finite and > 0", __LINE__);
  if (out.td_errors == nullptr || out.loss == nullptr)
    fail(std::string(out.td_errors == nullptr ? "td_errors" : "loss") + " is null", __LINE__);
  if (batch.states == nullptr || batch.actions == nullptr || batch.rewards == nullptr ||
      batch.dones == nullptr)
    fail("a batch view (states, actions, rewards or dones) is null", __LINE__);

  const Args args{out,       online, online_scratch, target, optimizer,
                  batch,     static_cast<int>(batch_size), constants,
                  static_cast<float>(1.0 / static_cast<double>(batch_size))};
  with_kernel(online.hidden_activation, op,
              [&](auto kernel) { launch_cooperative(kernel, grid, args, stream); });
}

}  // namespace resident::kernels::dqn
