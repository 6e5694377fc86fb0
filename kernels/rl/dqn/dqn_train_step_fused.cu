// The fused DQN gradient step (contract in dqn_train_step_fused.h). One cooperative kernel of
// kThreads-thread blocks, phases separated by grid barriers (kernels/nn/fused_step_phases.cuh):
//   forward l = 1 .. L-1  the online network's tiles over the 2B rows [states; next_states] and
//                         the target network's 32 x 32 tiles over the B next states, in one
//                         phase. The online tiles are 64 x 32 (two 32-row sub-tiles, both
//                         halves' chunk loads in flight together) when that makes the phase one
//                         round where 32 x 32 tiles take more (forward_items; at B = 256 and
//                         width 256 on 132 blocks: 64 + 64 items instead of 128 + 64 tiles),
//                         else 32 x 32. Each z and a element has the same bits either way
//                         (tile_product sums every output in one order for one sub-tile or two).
//   head                  2-row tiles (B / 2 of them: at B = 256 one per block), four warps per
//                         row: Q(s), Q(s') and Q_target(s') on three warps at once (lane o holds
//                         action o), then the double-DQN target, TD error and Huber terms by
//                         lane 0 of the row's first warp with dqn_loss_head's operations, dL/dq,
//                         and dz_{L-1} = (dL/dq W_L) f'(z_{L-1}) of the states' row over the
//                         row's four warps; thread 0 writes the tile's loss partial
//   backward l = L-1 .. 1 the online network over the B states (backward_phases; with split
//                         scratch the last phase's weight-gradient tiles split their K)
//   optimizer             norm, clip and AdamW over the online slab (optimizer_phase), then, on an
//                         update step, the target params of the same elements (each thread
//                         reads back the online params it just wrote); block 0 writes the loss
//                         (its warp 0 sums the tile partials in warp_loss_sum's fixed order;
//                         / B in double), the norm, step + 1, scale 1.
// Per row, the head's values do not depend on the tiling: each Q vector is one warp's
// warp_output_dots (lane-strided fmaf sums, the shuffle tree) plus the bias, the target / TD /
// Huber / dL/dq operations are one thread's, and each dz_{L-1} element is head_backward_columns'
// fmaf chain over the actions whichever thread takes it. So TD errors, dL/dq and dz_{L-1} are bit
// for bit those of a one-warp-per-row head (the 8-row tiles this file had before), and with them
// every gradient, the norm for a given grid, and the params. Only the loss's grouping depends on
// the tiling (2-row partials, summed by warp_loss_sum): deterministic, not the 8-row grouping's
// bits. The grid (dqn_fused_step_grid) counts the B / 2 head tiles among the phases' tiles.
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
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

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

// Forward phase l's work items for B rows and `out` outputs on `grid` blocks: the online pass's
// tiles (items 0 .. online - 1; 64 x 32 when pairs, else 32 x 32) then the target pass's 32 x 32
// tiles (online .. total - 1). Pairs exactly when they fit one round and 32 x 32 tiles do not:
// then the phase takes one round instead of two or more; otherwise the 32 x 32 tiles as before
// (one round already, or pairs would not make it one). The device's loop and the host's
// dqn_fused_step_forward_pairs use this one function.
struct ForwardItems {
  int online, total;
  bool pairs;
};

__host__ __device__ constexpr ForwardItems forward_items(int batch, int out, int grid) {
  const int singles = tiles_of(2 * batch, out), pairs = tiles_of(2 * batch, out, 2 * kTile);
  const int target = tiles_of(batch, out);
  const bool use_pairs = pairs + target <= grid && singles + target > grid;
  const int online = use_pairs ? pairs : singles;
  return {online, online + target, use_pairs};
}
static_assert(forward_items(256, 256, 132).pairs && forward_items(256, 256, 132).total == 128,
              "the bench shape's forward takes one round of pairs on an H200's 132 blocks");
static_assert(!forward_items(256, 256, 192).pairs && !forward_items(256, 256, 127).pairs,
              "32 x 32 tiles where they fit one round, or where pairs do not");

// The forward phases' shared memory: 32 x 32 tiles (also the backward phases') or 64 x 32 ones.
union ForwardChunks {
  Chunks single;
  ChunksOf<2> pair;
};

// The head phase's tiling: kDqnHeadRows rows per tile (block), each row on kHeadRowThreads
// threads (warps 4 r .. 4 r + 3 for row r of the tile). Warp k < 3 of a row computes one of its
// three Q vectors; lane 0 of its warp 0 the target, TD error and Huber terms; all four warps its
// dz_{L-1}.
constexpr int kDqnHeadRows = 2;
constexpr int kHeadRowThreads = kThreads / kDqnHeadRows;
constexpr int kHeadQs = 3;  // Q(s), Q(s'), Q_target(s')
static_assert(kThreads % kDqnHeadRows == 0 && kHeadRowThreads % 32 == 0 &&
                  kHeadRowThreads / 32 >= kHeadQs,
              "a head row needs whole warps, one per Q vector");

// The head tile's shared values.
struct HeadShared {
  float q[kDqnHeadRows][kHeadQs][kMaxOut];  // per row: [0] Q(s), [1] Q(s'), [2] Q_target(s')
  float dy[kDqnHeadRows][kMaxOut];          // per row: dL/dq
  float loss[kDqnHeadRows];                 // per row: w huber(Q(s, a) - target); 0 past B
};

// Head tile t: rows kDqnHeadRows t + r (r < kDqnHeadRows, those < B). The three Q vectors of a row
// by warp_output_dots on three warps at once (each the dot products and bias add of the one-warp
// head, in its order), exchanged through shared memory; then lane 0 of the row's first warp takes
// the double-DQN target, TD error, loss term and dL/dq[a] with dqn_loss_head's operations; then
// the row's 128 threads take dz_{L-1} = (dL/dq W_L) f'(z_{L-1}) by head_backward_columns (each
// column the same operations whichever thread takes it). Thread 0 writes the tile's loss partial
// (its rows' terms in order). Every thread of the block calls it.
template <ActivationKind Kind>
__device__ void dqn_head_tile(const Args& p, int t, HeadShared& s) {
  const int L = static_cast<int>(p.online.layers);
  const int in = static_cast<int>(p.online.widths[L - 1]);
  const int actions = static_cast<int>(p.online.widths[L]);
  const int slot = threadIdx.x / kHeadRowThreads;           // the row's place in the tile
  const int row_warp = threadIdx.x % kHeadRowThreads / 32;  // warp-uniform, as slot
  const int lane = threadIdx.x % 32;
  const int row = t * kDqnHeadRows + slot;
  const bool live = row < p.rows;
  const std::size_t base = static_cast<std::size_t>(row) * in;
  const float* w = p.online.weights[L - 1];
  std::int32_t action = 0;
  float reward = 0.0f, weight = 1.0f;
  std::uint8_t done = 0;
  if (live && row_warp == 0 && lane == 0) {  // in flight during the dot products
    action = p.batch.actions[row];
    reward = p.batch.rewards[row];
    done = p.batch.dones[row];
    if (p.batch.is_weights != nullptr) weight = p.batch.is_weights[row];
  }
  __syncthreads();  // the block's previous tile no longer reads s
  if (live && row_warp < kHeadQs) {
    const bool target_net = row_warp == 2;  // else online: the states (0) or next states (1)
    const float* a = target_net ? p.target.scratch.activations[L - 2] + base
                                : p.online_scratch.activations[L - 2] + base +
                                      (row_warp == 1 ? static_cast<std::size_t>(p.rows) * in : 0);
    const float* weights = target_net ? p.target.network.weights[L - 1] : w;
    const float* biases = target_net ? p.target.network.biases[L - 1] : p.online.biases[L - 1];
    const float bias = lane < actions ? biases[lane] : 0.0f;
    const float q = warp_output_dots(a, weights, in, actions) + bias;
    if (lane < actions) s.q[slot][row_warp][lane] = q;
  }
  __syncthreads();
  if (row_warp == 0) {
    float grad = 0.0f, row_loss = 0.0f;
    int taken = -1;
    if (live && lane == 0) {
      const float(&q)[kHeadQs][kMaxOut] = s.q[slot];
      const std::size_t best = greedy_action(q[1], static_cast<std::size_t>(actions));
      const float bootstrap = done != 0 ? 0.0f : __fmul_rn(p.c.discount, q[2][best]);
      const float target = __fadd_rn(__fmul_rn(p.c.reward_scale, reward), bootstrap);
      const bool valid = action >= 0 && action < actions;
      const float q_taken = valid ? q[0][action] : __int_as_float(0x7fc00000);
      p.out.td_errors[row] = __fsub_rn(target, q_taken);
      const float d = q_taken - target;
      row_loss = weight * huber::value(d, p.c.delta);
      const float scale = p.batch.is_weights != nullptr ? p.grad_scale * weight : p.grad_scale;
      grad = scale * huber::derivative(d, p.c.delta);
      taken = valid ? action : -1;
    }
    if (lane == 0) s.loss[slot] = row_loss;
    grad = __shfl_sync(0xffffffffu, grad, 0);
    taken = __shfl_sync(0xffffffffu, taken, 0);
    if (live && lane < actions) {
      const float g = lane == taken ? grad : 0.0f;
      p.online_scratch.d_pre_activations[L - 1][static_cast<std::size_t>(row) * actions + lane] = g;
      s.dy[slot][lane] = g;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int r = 0; r < kDqnHeadRows; ++r) sum += s.loss[r];
    p.online_scratch.loss_partials[t] = sum;
  }
  if (live)
    head_backward_columns<Kind>(p.online_scratch.d_pre_activations[L - 2] + base, s.dy[slot], w,
                                p.online_scratch.pre_activations[L - 2] + base, in, actions,
                                p.online.hidden_activation, threadIdx.x % kHeadRowThreads,
                                kHeadRowThreads);
}

// The sum of the head's loss partials [count] in a fixed order, by one warp: lane l adds partials
// l, l + 32, l + 64, ... in turn (its loads in flight together), then a shuffle tree (offsets 16,
// 8, 4, 2, 1) adds the lanes' sums. Valid in lane 0; all 32 lanes call it.
__device__ float warp_loss_sum(const float* partials, int count) {
  float sum = 0.0f;
#pragma unroll 4
  for (int i = threadIdx.x % 32; i < count; i += 32) sum += partials[i];
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  return sum;
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
__global__ void __launch_bounds__(kThreads, 1) dqn_train_step_fused(const __grid_constant__ Args p) {
  begin_after_prior_kernel();
  __shared__ ForwardChunks chunks;
  __shared__ HeadShared head;
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
    const ForwardItems items =
        forward_items(p.rows, static_cast<int>(p.online.widths[l]), static_cast<int>(gridDim.x));
    for (int t = blockIdx.x; t < items.total; t += gridDim.x) {
      if (items.pairs && t < items.online) {
        forward_tile<Kind, 2>(chunks.pair, online_both, l, t);
      } else {  // one call site for both passes' 32 x 32 tiles
        const bool online = t < items.online;
        const Pass pass = online ? online_both : target_next;
        forward_tile<Kind>(chunks.single, pass, l, online ? t : t - items.online);
      }
    }
    grid.sync();
    clock.mark();
  }
  const int head_tiles = (p.rows + kDqnHeadRows - 1) / kDqnHeadRows;
  for (int t = blockIdx.x; t < head_tiles; t += gridDim.x) dqn_head_tile<Kind>(p, t, head);
  grid.sync();
  clock.mark();

  FirstGroup first;
  const float norm =
      backward_and_optimizer<Kind>(chunks.single, grid, online_states, p.opt,
                                   p.online_scratch.norm_partials, reduce_temp, factors, clock, first);
  if ((step + 1) % p.target.period == 0) update_target_share(p, first.index);
  float loss_sum = 0.0f;
  if (blockIdx.x == 0 && threadIdx.x < 32)
    loss_sum = warp_loss_sum(p.online_scratch.loss_partials, head_tiles);
  finish_step_with_loss_sum(p.online_scratch, p.out.loss, loss_sum, static_cast<double>(p.rows),
                            p.opt, step, norm, clock);
}

template <typename Launch>
void with_kernel(const Activation& activation, const char* op, Launch&& launch) {
  activation_math::dispatch(activation, op, [&](auto kind) {
    launch(&dqn_train_step_fused<decltype(kind)::value>);
  });
}

std::size_t dqn_head_tiles_on_host(std::size_t batch) {
  return ceil_div(std::max<std::size_t>(batch, 1), kDqnHeadRows);
}

// The most tiles any phase hands out, the forward phases counted in 32 x 32 tiles: pairs are used
// only when those do not fit the grid (forward_items), so counting them would only shrink a
// grid that pairs fill anyway (and regroup the norm partials); the grid stays what it was.
std::size_t max_phase_tiles(std::span<const std::size_t> w, std::size_t batch) {
  std::size_t most = std::max(dqn_head_tiles_on_host(batch), most_backward_tiles(w, batch));
  for (std::size_t l = 1; l + 1 < w.size(); ++l)
    most = std::max(most, tiles_on_host(2 * batch, w[l]) + tiles_on_host(batch, w[l]));
  return most;
}

}  // namespace

std::size_t dqn_fused_step_loss_partials(std::size_t batch) noexcept {
  return dqn_head_tiles_on_host(batch);
}

bool dqn_fused_step_forward_pairs(std::size_t batch, std::size_t width, unsigned grid) noexcept {
  return forward_items(static_cast<int>(batch), static_cast<int>(width), static_cast<int>(grid)).pairs;
}

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
