// The fused DQN gradient step (kernels/rl/dqn/dqn_train_step_fused.h) against the
// double-precision references, on fresh random networks (online and target differ), batches
// (actions, rewards, dones, IS weights or none), outputs poisoned (NaN) first. Shapes: the DQN
// bench's 256 x (64-256-256-3) with Polyak updates, CartPole's 128 x (4-64-64-2) with a hard copy
// every second step and most rows on Huber's linear branch, and 37 x (5-33-7) (two layers, tanh,
// no IS weights, clipped, on 3 blocks so that every block takes several tiles and optimizer
// groups, two rows with invalid actions: NaN TD error and loss, zero gradient), and the head
// phase's tiling edges (2-row tiles): one row (more blocks than rows), 6 rows of 32 actions on 2
// blocks with an invalid action in the second row of a block's second tile, and the trainer's
// largest batch (1024 rows: more head tiles than blocks). Checked at each step: TD errors, dL/dq
// and (ReLU) dz_{L-1} bit for bit against a CPU emulation of the head's order (warp_output_dots,
// the target / TD operations, head_backward_columns) from the step's own activations; TD errors
// and the loss against the reference forward of both networks and the double-DQN
// target / TD error / weighted Huber references; every online gradient against the reference
// backward of d loss / dQ; the norm, params, m and v against the reference's clip + AdamW on
// the GPU's gradients, and the clip scale left at 1; the target params against the reference
// target update from the GPU's new online params; the step counter. The trainer-level checks (graph replay = eager, audit
// contract, learning) are dqn_trainer_test's and dqn_learning_test's, which run this kernel by
// default. DqnFusedStepForward checks every hidden layer's z and a of both passes bit for bit
// against a CPU emulation of tile_product's order, on cases whose online pass runs in 64 x 32
// pairs (forced by the grid, or on the device's grid: printed) and in 32 x 32 tiles, with row
// counts that are not multiples of 64 (B = 200, 17, 1); DqnFusedStepForwardEmulation (CPU)
// checks that emulation against doubles and that it tells summation orders apart. Argument
// checks run without a GPU. DqnFusedStepPhases prints each phase's median time at the bench's
// shape (the kernel's diagnostic phase clock).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/nn/mlp_train_step_fused.h"
#include "kernels/rl/dqn/dqn_train_step_fused.h"
#include "lib/core/device_buffer.h"
#include "lib/core/scalar_readback.h"
#include "lib/nn/mlp.h"
#include "tests/nn/fused_step_test_support.h"
#include "tests/nn/mlp_reference_support.h"
#include "tests/nn/nn_test_support.h"
#include "tests/nn/tile_order.h"
#include "tests/reference/nn_reference.h"
#include "tests/rl/dqn/dqn_reference.h"
#include "tests/support/gpu.h"
#include "tests/support/phase_clock.h"

namespace {

using namespace resident;
namespace kd = resident::kernels::dqn;
using test::mlp_reference::MlpRig;
using test::nn_support::expect_close;
using test::nn_support::random_floats;
using test::nn_support::to_double;

struct DqnCase {
  std::vector<std::size_t> widths;  // {obs, hidden..., actions}
  std::size_t batch;
  kernels::ActivationKind activation;
  bool is_weights;
  float tau;
  std::uint64_t period;
  float max_grad_norm;
  float delta;           // Huber threshold (small: the linear branch is taken)
  unsigned grid;         // 0: dqn_fused_step_grid's; else this many blocks (several tiles each)
  bool invalid_actions;  // row 0 takes action -1 and the last row action A (NaN TD, zero gradient)
  const char* name;
  // Split-K scratch for the last backward phase (FusedStepScratch::split_partials): the kernel
  // splits its weight-gradient tiles where the grid has room (at least 65 rows).
  bool split = true;
};

class DqnFusedStep : public ::testing::TestWithParam<DqnCase> {};

std::vector<double> flat_part(const MlpRig& rig, nn::SlabPart part) {
  return test::mlp_reference::flat(rig.mlp, rig.slab.download(part, rig.context.stream()),
                                   rig.slab);
}

// The kernel's view of a network on its slab.
kernels::FusedStepMlp network_view(MlpRig& rig) {
  kernels::FusedStepMlp view;
  const std::vector<std::size_t>& w = rig.mlp.config().widths;
  view.layers = rig.mlp.layers();
  view.hidden_activation = rig.mlp.config().hidden_activation;
  for (std::size_t l = 0; l < w.size(); ++l) view.widths[l] = w[l];
  for (std::size_t l = 0; l < rig.mlp.layers(); ++l) {
    view.weights[l] = rig.slab.param(rig.mlp.weight_name(l));
    view.biases[l] = rig.slab.param(rig.mlp.bias_name(l));
    view.weight_grads[l] = rig.slab.grad(rig.mlp.weight_name(l));
    view.bias_grads[l] = rig.slab.grad(rig.mlp.bias_name(l));
  }
  return view;
}

// warp_output_dots's order (kernels/nn/fused_step_phases.cuh) for one output: lane l sums
// a[k] w[k] over k = l, l + 32, ... by fmaf; then the shuffle tree (offsets 16, 8, 4, 2, 1: lane i
// adds lane i + offset's sum, its own past lane 31) leaves the total in lane 0.
float warp_dot_in_order(const float* a, const float* w, std::size_t in) {
  std::array<float, 32> lanes{};
  for (std::size_t l = 0; l < 32; ++l)
    for (std::size_t k = l; k < in; k += 32) lanes[l] = std::fmaf(a[k], w[k], lanes[l]);
  for (std::size_t offset = 16; offset > 0; offset /= 2) {
    const std::array<float, 32> before = lanes;
    for (std::size_t i = 0; i < 32; ++i)
      lanes[i] = before[i] + (i + offset < 32 ? before[i + offset] : before[i]);
  }
  return lanes[0];
}

// The head's per-row outputs as the kernel computes them, in fp32 with its operations in its
// order: Q vectors by warp_dot_in_order plus the bias; the double-DQN target, TD error and
// dL/dq (kernels/rl/dqn/dqn_train_step_fused.cu, dqn_loss_head's operations); dz_{L-1} by
// head_backward_columns' fmaf chain over the actions times relu'(z) (ReLU only: other kinds' f'
// are not reproducible on the CPU; dz is then left empty).
struct HeadBits {
  std::vector<float> td, dq, dz;
};

struct HeadInputs {
  std::size_t b, in, actions;
  const std::vector<float>& online_a;  // [2B, in]: the states' rows, then the next states'
  const std::vector<float>& target_a;  // [B, in]: the next states'
  const std::vector<float>& online_z;  // [2B, in]
  const std::vector<float>& online_w;  // W_L [A, in], b_L [A] of the online network
  const std::vector<float>& online_bias;
  const std::vector<float>& target_w;
  const std::vector<float>& target_bias;
  const std::vector<std::int32_t>& actions_taken;
  const std::vector<float>& rewards;
  const std::vector<std::uint8_t>& dones;
  const std::vector<float>* is_weights;  // null: 1
  kd::DqnFusedConstants constants;
  bool relu;
};

HeadBits emulate_head(const HeadInputs& h) {
  HeadBits out{std::vector<float>(h.b), std::vector<float>(h.b * h.actions), {}};
  if (h.relu) out.dz.resize(h.b * h.in);
  const float grad_scale = static_cast<float>(1.0 / static_cast<double>(h.b));
  std::vector<float> q(h.actions), q_next(h.actions), q_target(h.actions);
  for (std::size_t r = 0; r < h.b; ++r) {
    for (std::size_t o = 0; o < h.actions; ++o) {
      const float* w = h.online_w.data() + o * h.in;
      q[o] = warp_dot_in_order(h.online_a.data() + r * h.in, w, h.in) + h.online_bias[o];
      q_next[o] =
          warp_dot_in_order(h.online_a.data() + (h.b + r) * h.in, w, h.in) + h.online_bias[o];
      q_target[o] = warp_dot_in_order(h.target_a.data() + r * h.in, h.target_w.data() + o * h.in,
                                      h.in) + h.target_bias[o];
    }
    std::size_t best = 0;  // greedy_action: the first largest, NaN skipped
    bool found = false;
    for (std::size_t o = 0; o < h.actions; ++o)
      if (q_next[o] == q_next[o] && (!found || q_next[o] > q_next[best])) {
        best = o;
        found = true;
      }
    const float bootstrap = h.dones[r] != 0 ? 0.0f : h.constants.discount * q_target[best];
    const float scaled_reward = h.constants.reward_scale * h.rewards[r];
    const float target = scaled_reward + bootstrap;
    const std::int32_t action = h.actions_taken[r];
    const bool valid = action >= 0 && static_cast<std::size_t>(action) < h.actions;
    const float q_taken = valid ? q[static_cast<std::size_t>(action)]
                                : std::numeric_limits<float>::quiet_NaN();
    out.td[r] = target - q_taken;
    const float d = q_taken - target;
    const float delta = h.constants.delta;
    const float clamped = d > delta ? delta : (d < -delta ? -delta : d);
    const float scale = h.is_weights != nullptr ? grad_scale * (*h.is_weights)[r] : grad_scale;
    const float grad = scale * clamped;
    float* dq = out.dq.data() + r * h.actions;
    for (std::size_t o = 0; o < h.actions; ++o)
      dq[o] = valid && o == static_cast<std::size_t>(action) ? grad : 0.0f;
    if (!h.relu) continue;
    for (std::size_t c = 0; c < h.in; ++c) {
      const float derivative = h.online_z[r * h.in + c] > 0.0f ? 1.0f : 0.0f;
      float sum = 0.0f;
      for (std::size_t o = 0; o < h.actions; ++o)
        sum = std::fmaf(dq[o], h.online_w[o * h.in + c], sum);
      out.dz[r * h.in + c] = sum * derivative;
    }
  }
  return out;
}

// Bit for bit (a NaN matches any NaN); prints the count compared and the first difference.
void expect_bits(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::size_t differ = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool same = (std::isnan(got[i]) && std::isnan(want[i])) ||
                      std::bit_cast<std::uint32_t>(got[i]) == std::bit_cast<std::uint32_t>(want[i]);
    if (!same && differ++ == 0) first = i;
  }
  EXPECT_EQ(differ, 0u) << what << ": first at " << first << ", gpu " << got[first] << " (0x"
                        << std::hex << std::bit_cast<std::uint32_t>(got[first]) << "), emulated "
                        << want[first] << " (0x" << std::bit_cast<std::uint32_t>(want[first])
                        << ")" << std::dec;
  std::printf("    %-22s %8zu values bit for bit, %zu differ\n", what.c_str(), got.size(), differ);
}

// The kernel's inputs for one case: online and target networks on their slabs (random
// weights, non-zero biases; the two differ), scratch, views, the optimizer and the outputs.
struct FusedDqnRig {
  DqnCase c;
  std::size_t b, obs, actions, layers;
  nn::MlpConfig mlp_config;
  MlpRig online, target;
  std::mt19937_64 rng;
  std::vector<DeviceBuffer<float>> buffers;
  kernels::FusedStepMlp online_view;
  kd::DqnFusedTarget target_view;
  kernels::FusedStepScratch online_scratch;
  unsigned grid;
  DeviceBuffer<double> norm_partials;
  DeviceBuffer<float> split_partials;
  DeviceBuffer<std::uint32_t> split_counters;
  nn::AdamWConfig adamw;
  kernels::FusedStepOptimizer optimizer;
  kd::DqnFusedConstants constants;
  DeviceBuffer<float> d_td, d_loss;

  explicit FusedDqnRig(const DqnCase& dqn_case)
      : c(dqn_case),
        b(c.batch),
        obs(c.widths.front()),
        actions(c.widths.back()),
        layers(c.widths.size() - 1),
        mlp_config{.widths = c.widths, .hidden_activation = {c.activation}},
        online(mlp_config, 2 * b, 101 + b),
        target(mlp_config, b, 202 + b),
        rng(b * 977 + obs),
        d_td(b),
        d_loss(1) {
    for (MlpRig* rig : {&online, &target})  // non-zero biases
      for (std::size_t l = 0; l < layers; ++l)
        rig->slab.upload(nn::SlabPart::Params, rig->mlp.bias_name(l),
                         random_floats(c.widths[l + 1], -0.2f, 0.2f, rng), rig->context.stream());
    target.context.synchronize();
    const auto scratch = [&](std::size_t n) { return buffers.emplace_back(n).data(); };
    online_view = network_view(online);
    target_view.network = network_view(target);
    for (std::size_t l = 0; l < layers; ++l) {
      online_scratch.d_pre_activations[l] = scratch(b * c.widths[l + 1]);
      if (l + 1 < layers) {
        online_scratch.pre_activations[l] = scratch(2 * b * c.widths[l + 1]);
        online_scratch.activations[l] = scratch(2 * b * c.widths[l + 1]);
        target_view.scratch.pre_activations[l] = scratch(b * c.widths[l + 1]);
        target_view.scratch.activations[l] = scratch(b * c.widths[l + 1]);
      }
    }
    online_scratch.loss_partials = scratch(kd::dqn_fused_step_loss_partials(b));
    grid = c.grid != 0 ? c.grid : kd::dqn_fused_step_grid(c.widths, b, mlp_config.hidden_activation);
    norm_partials = DeviceBuffer<double>(grid);
    online_scratch.norm_partials = norm_partials.data();
    if (c.split) {
      split_partials = DeviceBuffer<float>(kernels::fused_step_split_partials(c.widths));
      split_counters = DeviceBuffer<std::uint32_t>(kernels::fused_step_split_tiles(c.widths));
      if (cudaMemset(split_counters.data(), 0, split_counters.bytes()) != cudaSuccess)
        throw Error("FusedDqnRig", "cudaMemset failed", "split counters", __FILE__, __LINE__);
      online_scratch.split_partials = split_partials.data();
      online_scratch.split_counters = split_counters.data();
    }
    target_view.params = target.slab.params();
    target_view.tau = c.tau;
    target_view.period = c.period;
    adamw.lr = 1e-3;
    adamw.weight_decay = 0.01;
    const nn::ParamSlab::OptimizerViews views = online.slab.optimizer_views();
    optimizer = {.params = views.params, .m = views.m, .v = views.v, .grads = views.grads,
                 .decay_mask = views.decay_mask, .n = views.n, .step = views.step,
                 .norm = views.grad_norm, .grad_scale = views.clip_scale,
                 .max_norm = c.max_grad_norm, .constants = nn::adamw_constants(adamw, "test")};
    constants = {0.97f, 0.5f, c.delta};
  }

  // The scratch buffer at `data` (its blocking upload and download).
  DeviceBuffer<float>& buffer_at(const float* data) {
    for (DeviceBuffer<float>& buffer : buffers)
      if (buffer.data() == data) return buffer;
    throw Error("FusedDqnRig::buffer_at", "not a scratch buffer", "", __FILE__, __LINE__);
  }

  void launch(const DeviceBuffer<float>& states, const DeviceBuffer<std::int32_t>& acts,
              const DeviceBuffer<float>& rewards, const DeviceBuffer<std::uint8_t>& dones,
              const float* is_weights) {
    kd::launch_dqn_train_step_fused({d_td.data(), d_loss.data()}, online_view, online_scratch,
                                    target_view, optimizer,
                                    {states.data(), acts.data(), rewards.data(), dones.data(),
                                     is_weights},
                                    b, constants, grid, online.context.stream());
  }
};

TEST_P(DqnFusedStep, StepsMatchTheReferences) {
  RESIDENT_REQUIRE_GPU();
  FusedDqnRig rig(GetParam());
  const DqnCase& c = rig.c;
  const std::size_t b = rig.b, obs = rig.obs, actions = rig.actions, layers = rig.layers;
  MlpRig& online = rig.online;
  MlpRig& target = rig.target;
  const cudaStream_t stream = online.context.stream();
  std::mt19937_64& rng = rig.rng;
  const nn::AdamWConfig& adamw = rig.adamw;
  const kd::DqnFusedConstants& constants = rig.constants;
  DeviceBuffer<float>& d_td = rig.d_td;
  DeviceBuffer<float>& d_loss = rig.d_loss;

  const auto layers_ref = test::mlp_reference::reference_layers(online.mlp);
  std::vector<std::uint8_t> decay;  // the reference's flat mask: weights 1, biases 0
  for (std::size_t l = 0; l < layers; ++l) {
    decay.insert(decay.end(), c.widths[l] * c.widths[l + 1], 1);
    decay.insert(decay.end(), c.widths[l + 1], 0);
  }
  const reference::AdamWConfig adamw_ref{adamw.lr, adamw.beta1, adamw.beta2, adamw.eps,
                                         adamw.weight_decay};
  const test::nn_support::Tolerance gemm_tolerance{1e-4, 1e-3};
  const test::nn_support::Tolerance optimizer_tolerance{1e-6, 1e-5};

  for (std::uint64_t step = 1; step <= 2; ++step) {
    const std::string at = std::string(c.name) + ", step " + std::to_string(step);
    // A fresh batch: states then next states in one block; one done in four.
    const std::vector<float> states = random_floats(2 * b * obs, -1.0f, 1.0f, rng);
    std::vector<std::int32_t> acts(b);
    std::vector<std::uint8_t> dones(b);
    std::uniform_int_distribution<std::int32_t> action_draw(0, static_cast<std::int32_t>(actions) - 1);
    for (std::size_t i = 0; i < b; ++i) {
      acts[i] = action_draw(rng);
      dones[i] = (rng() % 4) == 0;
    }
    std::vector<bool> invalid(b, false);
    if (c.invalid_actions) {
      acts[0] = -1;
      acts[b - 1] = static_cast<std::int32_t>(actions);
      invalid[0] = invalid[b - 1] = true;
    }
    const std::vector<float> rewards = random_floats(b, -1.0f, 1.0f, rng);
    const std::vector<float> weights = random_floats(b, 0.2f, 1.0f, rng);
    DeviceBuffer<float> d_states(states.size()), d_rewards(b), d_weights(b);
    DeviceBuffer<std::int32_t> d_actions(b);
    DeviceBuffer<std::uint8_t> d_dones(b);
    d_states.upload(states);
    d_rewards.upload(rewards);
    d_weights.upload(weights);
    d_actions.upload(acts);
    d_dones.upload(dones);

    const std::vector<double> online_before = flat_part(online, nn::SlabPart::Params);
    const std::vector<double> m_before = flat_part(online, nn::SlabPart::AdamM);
    const std::vector<double> v_before = flat_part(online, nn::SlabPart::AdamV);
    const std::vector<double> target_before = flat_part(target, nn::SlabPart::Params);
    for (std::size_t l = 0; l < layers; ++l)  // poison the outputs
      for (const std::string& name : {online.mlp.weight_name(l), online.mlp.bias_name(l)})
        online.slab.upload(nn::SlabPart::Grads, name, test::nn_support::nans(online.slab.size(name)),
                           stream);
    d_td.upload(test::nn_support::nans(b));
    d_loss.upload(test::nn_support::nans(1));
    const std::size_t in = c.widths[layers - 1];
    DeviceBuffer<float>& d_dq = rig.buffer_at(rig.online_scratch.d_pre_activations[layers - 1]);
    DeviceBuffer<float>& d_dz_head =  // dz_{L-1} [B, in]
        rig.buffer_at(rig.online_scratch.d_pre_activations[layers - 2]);
    d_dq.upload(test::nn_support::nans(b * actions));
    d_dz_head.upload(test::nn_support::nans(b * in));

    rig.launch(d_states, d_actions, d_rewards, d_dones, c.is_weights ? d_weights.data() : nullptr);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    if (c.split) {  // every split tile's parts met and its counter was reset for the next launch
      const std::vector<std::uint32_t> counters = rig.split_counters.download();
      EXPECT_EQ(std::count(counters.begin(), counters.end(), 0u),
                static_cast<std::ptrdiff_t>(counters.size()))
          << at << ": a split counter was left non-zero";
    }

    {  // The head's per-row outputs bit for bit, from the step's own activations.
      std::size_t w_at = 0;  // W_L's offset in the flat layout: per layer the weight, the bias
      for (std::size_t l = 0; l + 1 < layers; ++l)
        w_at += c.widths[l] * c.widths[l + 1] + c.widths[l + 1];
      const auto part = [](const std::vector<double>& flat, std::size_t at, std::size_t n) {
        return std::vector<float>(flat.begin() + static_cast<std::ptrdiff_t>(at),
                                  flat.begin() + static_cast<std::ptrdiff_t>(at + n));
      };
      const std::vector<float> online_w = part(online_before, w_at, actions * in);
      const std::vector<float> online_bias = part(online_before, w_at + actions * in, actions);
      const std::vector<float> target_w = part(target_before, w_at, actions * in);
      const std::vector<float> target_bias = part(target_before, w_at + actions * in, actions);
      const std::vector<float> online_a =
          rig.buffer_at(rig.online_scratch.activations[layers - 2]).download();  // [2B, in]
      const std::vector<float> online_z =
          rig.buffer_at(rig.online_scratch.pre_activations[layers - 2]).download();
      const std::vector<float> target_a =
          rig.buffer_at(rig.target_view.scratch.activations[layers - 2]).download();  // [B, in]
      const bool relu = c.activation == kernels::ActivationKind::Relu;
      const HeadBits want = emulate_head(
          {b, in, actions, online_a, target_a, online_z, online_w, online_bias, target_w,
           target_bias, acts, rewards, dones, c.is_weights ? &weights : nullptr, constants, relu});
      expect_bits(d_td.download(), want.td, "td errors (bits), " + at);
      expect_bits(d_dq.download(), want.dq, "dL/dq (bits), " + at);
      if (relu) expect_bits(d_dz_head.download(), want.dz, "dz_L-1 (bits), " + at);
    }

    // The references from the parameters the step started from.
    const std::vector<double> s_d = to_double(states);
    const std::vector<double> s_states(s_d.begin(), s_d.begin() + b * obs);
    const std::vector<double> s_next(s_d.begin() + b * obs, s_d.end());
    const std::vector<double> q = reference::mlp_forward(layers_ref, b, online_before, s_states);
    const std::vector<double> q_next = reference::mlp_forward(layers_ref, b, online_before, s_next);
    const std::vector<double> q_target =
        reference::mlp_forward(layers_ref, b, target_before, s_next);
    const std::vector<double> targets = reference::dqn::double_dqn_target(
        q_next, q_target, to_double(rewards), dones, actions, constants.discount,
        constants.reward_scale);
    // An invalid action's row: the reference evaluates action 0 there, then its TD error and
    // loss become NaN and its gradient row 0 (the kernel's contract).
    std::vector<std::int32_t> valid_acts = acts;
    for (std::size_t i = 0; i < b; ++i)
      if (invalid[i]) valid_acts[i] = 0;
    reference::dqn::TdError td = reference::dqn::td_error(q, valid_acts, targets, actions);
    const std::vector<double> w = c.is_weights ? to_double(weights) : std::vector<double>{};
    const double loss = reference::huber_loss(b, 1, td.q_taken, targets, w, constants.delta);
    std::vector<double> d_taken(b);
    reference::huber_loss_backward(b, 1, td.q_taken, targets, w, constants.delta, 1.0, d_taken,
                                   reference::GradMode::Overwrite);
    std::size_t linear = 0;  // rows on Huber's linear (clamped) branch
    for (std::size_t i = 0; i < b; ++i) {
      if (invalid[i]) {
        d_taken[i] = 0.0;
        td.td[i] = std::numeric_limits<double>::quiet_NaN();
      } else if (std::fabs(td.q_taken[i] - targets[i]) > constants.delta) {
        ++linear;
      }
    }
    if (c.delta < 0.1f) EXPECT_GT(linear, b / 4) << at << ": the case must reach the linear branch";
    const std::vector<double> d_q = reference::dqn::action_value_grad(d_taken, valid_acts, actions);
    std::vector<double> unused_dx(s_states.size()), ref_grads(online_before.size());
    reference::mlp_backward(layers_ref, b, online_before, s_states, d_q, {unused_dx, ref_grads},
                            reference::GradMode::Overwrite);

    std::vector<float> got_td = d_td.download();
    for (std::size_t i = 0; i < b; ++i) {
      if (!invalid[i]) continue;
      EXPECT_TRUE(std::isnan(got_td[i])) << at << ": row " << i << " has an invalid action";
      got_td[i] = 0.0f;  // compared below as 0 against 0
      td.td[i] = 0.0;
    }
    expect_close(got_td, td.td, gemm_tolerance, "td errors, " + at);
    if (c.invalid_actions)
      EXPECT_TRUE(std::isnan(d_loss.download()[0])) << at << ": an invalid action's loss is NaN";
    else
      expect_close(d_loss.download(), {loss}, {1e-6, 1e-4}, "loss, " + at);
    const std::vector<double> grads = flat_part(online, nn::SlabPart::Grads);
    expect_close(std::vector<float>(grads.begin(), grads.end()), ref_grads, gemm_tolerance,
                 "gradients, " + at);

    // The optimizer and the target update on the GPU's gradients and new params.
    std::vector<double> g = grads, params = online_before, m = m_before, v = v_before;
    const double norm = reference::global_norm(g);
    reference::clip_global_norm(g, c.max_grad_norm);
    reference::adamw_step(adamw_ref, step, params, g, m, v, decay);
    ScalarReadback<float> norm_readback;
    norm_readback.enqueue(online.slab.grad_norm(), stream);
    expect_close({norm_readback.wait()}, {norm}, {0.0, 1e-6}, "norm, " + at);
    const std::vector<double> online_after = flat_part(online, nn::SlabPart::Params);
    expect_close(std::vector<float>(online_after.begin(), online_after.end()), params,
                 optimizer_tolerance, "params, " + at);
    const std::vector<double> m_after = flat_part(online, nn::SlabPart::AdamM);
    expect_close(std::vector<float>(m_after.begin(), m_after.end()), m, optimizer_tolerance,
                 "m, " + at);
    const std::vector<double> v_after = flat_part(online, nn::SlabPart::AdamV);
    expect_close(std::vector<float>(v_after.begin(), v_after.end()), v, {1e-12, 1e-5}, "v, " + at);
    ScalarReadback<float> scale_readback;
    scale_readback.enqueue(online.slab.clip_scale(), stream);
    EXPECT_EQ(scale_readback.wait(), 1.0f) << at << ": no clip scale pending after the step";
    EXPECT_EQ(online.slab.read_step(stream), step) << at;
    const std::vector<double> want_target =
        reference::dqn::target_update(target_before, online_after, c.tau, c.period, step);
    const std::vector<double> target_after = flat_part(target, nn::SlabPart::Params);
    expect_close(std::vector<float>(target_after.begin(), target_after.end()), want_target,
                 {1e-7, 1e-6}, "target params, " + at);
    if (step % c.period != 0)
      EXPECT_EQ(target_after, target_before) << at << ": not an update step";
    if (c.max_grad_norm < 1.0f) EXPECT_GT(norm, c.max_grad_norm) << at << ": the case must clip";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DqnFusedStep,
    ::testing::Values(
        DqnCase{{64, 256, 256, 3}, 256, kernels::ActivationKind::Relu, true, 0.005f, 1, 10.0f,
                1.0f, 0, false, "bench_shape_polyak"},
        DqnCase{{64, 256, 256, 3}, 256, kernels::ActivationKind::Relu, true, 0.005f, 1, 10.0f,
                1.0f, 0, false, "bench_shape_polyak_no_split", /*split=*/false},
        // 24 weight-gradient tiles of the last backward phase on 30 blocks: one block per tile.
        DqnCase{{64, 256, 256, 3}, 256, kernels::ActivationKind::Relu, true, 0.005f, 1, 10.0f,
                1.0f, 30, false, "bench_shape_30_blocks_no_room_to_split"},
        // 72 blocks: each tile in 3 parts of 1, 1 and 2 chunks (K = 256).
        DqnCase{{64, 256, 256, 3}, 256, kernels::ActivationKind::Relu, true, 0.005f, 1, 10.0f,
                1.0f, 72, false, "bench_shape_72_blocks_3_parts"},
        DqnCase{{4, 64, 64, 2}, 128, kernels::ActivationKind::Relu, true, 1.0f, 2, 10.0f, 0.05f,
                0, false, "cartpole_hard_copy_every_2_linear_huber"},
        DqnCase{{5, 33, 7}, 37, kernels::ActivationKind::Tanh, false, 0.5f, 1, 0.01f, 0.5f, 3,
                true, "two_layers_unweighted_clipped_3_blocks_invalid_actions"},
        DqnCase{{4, 64, 64, 2}, 1, kernels::ActivationKind::Relu, true, 1.0f, 1, 10.0f, 1.0f, 0,
                false, "one_row_more_blocks_than_rows"},
        DqnCase{{6, 40, 32}, 6, kernels::ActivationKind::Relu, true, 0.5f, 1, 10.0f, 0.5f, 2, true,
                "six_rows_32_actions_2_blocks_invalid_action_in_a_second_tile_row"},
        DqnCase{{8, 32, 32, 4}, 1024, kernels::ActivationKind::Relu, false, 1.0f, 3, 10.0f, 1.0f,
                0, false, "trainer_max_batch_more_head_tiles_than_blocks"}),
    [](const ::testing::TestParamInfo<DqnCase>& info) { return std::string(info.param.name); });

// The diagnostic phase clock at the DQN bench's shape (256 x 64-256-256-3, Polyak, IS weights):
// 2 * layers + 1 readings per step, in order; prints the median duration of each phase (with the
// barrier ending it) over 50 steps on one batch, after 10 unclocked ones.
TEST(DqnFusedStepPhases, ClockReadingsAreOrderedAndPrinted) {
  RESIDENT_REQUIRE_GPU();
  FusedDqnRig rig(DqnCase{{64, 256, 256, 3}, 256, kernels::ActivationKind::Relu, true, 0.005f, 1,
                          10.0f, 1.0f, 0, false, "bench_shape"});
  const std::size_t b = rig.b;
  DeviceBuffer<float> states(2 * b * rig.obs), rewards(b), weights(b);
  DeviceBuffer<std::int32_t> acts(b);
  DeviceBuffer<std::uint8_t> dones(b);
  states.upload(random_floats(states.size(), -1.0f, 1.0f, rig.rng));
  rewards.upload(random_floats(b, -1.0f, 1.0f, rig.rng));
  weights.upload(random_floats(b, 0.2f, 1.0f, rig.rng));
  std::vector<std::int32_t> a(b);
  std::vector<std::uint8_t> d(b);
  for (std::size_t i = 0; i < b; ++i) {
    a[i] = static_cast<std::int32_t>(rig.rng() % rig.actions);
    d[i] = (rig.rng() % 4) == 0;
  }
  acts.upload(a);
  dones.upload(d);
  const std::size_t slots = 2 * rig.layers + 1;
  DeviceBuffer<std::uint64_t> times(slots);
  std::vector<std::vector<double>> durations(slots - 1);
  for (int s = 0; s < 60; ++s) {
    rig.online_scratch.phase_times = s < 10 ? nullptr : times.data();
    rig.launch(states, acts, rewards, dones, weights.data());
    rig.online.context.synchronize();
    if (s < 10) continue;
    ASSERT_EQ(test::phase_clock::add_phase_durations(times.download(), durations), "")
        << "step " << s;
  }
  test::phase_clock::print_phase_medians(
      durations, {"forward 1 (online 2B + target B)", "forward 2 (online 2B + target B)",
                  "head (Q, targets, Huber, dz2)", "backward 2", "backward 1 + norm partials",
                  "optimizer + target update"});
}

// tile_product's order for one output of a forward tile (kernels/nn/fused_step_phases.cuh), the
// same for 32 x 32 tiles and 64 x 32 pairs: thread group g of 4 sums k = 64 q + 16 g .. 64 q +
// 16 g + 15 over the chunks q ascending by fmaf (the whole slice: 0 past K), then the groups'
// sums are added as ((g0 + g1) + g2) + g3. The other orders are the CPU test's proof that the bit
// check below sees an order change.
enum class SumOrder { Tile, GroupsReversed, Sequential };

float tile_order_dot(const float* a, const float* w, std::size_t in,
                     SumOrder order = SumOrder::Tile) {
  if (order == SumOrder::Sequential) {
    float sum = 0.0f;
    for (std::size_t k = 0; k < in; ++k) sum = std::fmaf(a[k], w[k], sum);
    return sum;
  }
  const int K = static_cast<int>(in);
  const std::array<float, test::tile_order::kSlices> c = test::tile_order::slice_sums(
      [&](int k) { return k < K ? a[k] : 0.0f; }, [&](int k) { return k < K ? w[k] : 0.0f; }, K);
  return order == SumOrder::Tile ? test::tile_order::in_order(c)
                                 : ((c[3] + c[2]) + c[1]) + c[0];
}

// One hidden layer as forward_tile computes it: z = x W^T + b per output (tile_order_dot, then
// + the bias) and a = relu(z) (relu_value: the kernel's x > 0 ? x : 0). x [rows, in], W [out, in].
struct ForwardLayerBits {
  std::vector<float> z, a;
};

float relu_value(float x) { return x > 0.0f ? x : 0.0f; }

ForwardLayerBits emulate_forward_layer(const float* x, std::size_t rows, const float* w,
                                       const float* bias, std::size_t in, std::size_t out,
                                       SumOrder order = SumOrder::Tile) {
  ForwardLayerBits bits{std::vector<float>(rows * out), std::vector<float>(rows * out)};
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t o = 0; o < out; ++o) {
      const float z = tile_order_dot(x + r * in, w + o * in, in, order) + bias[o];
      bits.z[r * out + o] = z;
      bits.a[r * out + o] = relu_value(z);
    }
  return bits;
}

// A forward case: the grid (0: dqn_fused_step_grid's) and, per hidden layer, whether the online
// pass must be in 64 x 32 pairs there (1), in 32 x 32 tiles (0), or either (-1: it depends on the
// device's grid; printed).
struct ForwardCase {
  std::vector<std::size_t> widths;
  std::size_t batch;
  kernels::ActivationKind activation;
  unsigned grid;
  std::vector<int> pairs;
  const char* name;
};

class DqnFusedStepForward : public ::testing::TestWithParam<ForwardCase> {};

// Every hidden layer's z and a of both passes (the online network over [states; next states],
// the target network over the next states) bit for bit against emulate_forward_layer from the
// step's starting params, each layer from the GPU's previous activations (checked before it; a
// only for ReLU, the one activation the CPU reproduces). The scratch is poisoned (NaN) first, so
// every row must be written, and rows past 2B or B (a pair's second half partly or wholly past
// them) must not be: the buffers are exactly [2B, width] and [B, width].
TEST_P(DqnFusedStepForward, ActivationsMatchTheTileOrderBitForBit) {
  RESIDENT_REQUIRE_GPU();
  const ForwardCase& fc = GetParam();
  FusedDqnRig rig(DqnCase{fc.widths, fc.batch, fc.activation, true, 0.5f, 1, 10.0f, 1.0f, fc.grid,
                          false, fc.name});
  const std::size_t b = rig.b, obs = rig.obs, layers = rig.layers;
  ASSERT_EQ(fc.pairs.size(), layers - 1) << fc.name;
  const cudaStream_t stream = rig.online.context.stream();
  const std::vector<float> states = random_floats(2 * b * obs, -1.0f, 1.0f, rig.rng);
  std::vector<std::int32_t> acts(b);
  std::vector<std::uint8_t> dones(b);
  for (std::size_t i = 0; i < b; ++i) {
    acts[i] = static_cast<std::int32_t>(rig.rng() % rig.actions);
    dones[i] = (rig.rng() % 4) == 0;
  }
  DeviceBuffer<float> d_states(states.size()), d_rewards(b), d_weights(b);
  DeviceBuffer<std::int32_t> d_actions(b);
  DeviceBuffer<std::uint8_t> d_dones(b);
  d_states.upload(states);
  d_rewards.upload(random_floats(b, -1.0f, 1.0f, rig.rng));
  d_weights.upload(random_floats(b, 0.2f, 1.0f, rig.rng));
  d_actions.upload(acts);
  d_dones.upload(dones);
  const auto params_of = [](MlpRig& rig_of) {
    const std::vector<double> flat = flat_part(rig_of, nn::SlabPart::Params);
    return std::vector<float>(flat.begin(), flat.end());  // the fp32 params, exactly
  };
  const std::vector<float> online_params = params_of(rig.online);
  const std::vector<float> target_params = params_of(rig.target);
  struct Hidden {
    const float *online_z, *online_a, *target_z, *target_a;
  };
  std::vector<Hidden> hidden;
  for (std::size_t l = 0; l + 1 < layers; ++l) {
    hidden.push_back({rig.online_scratch.pre_activations[l], rig.online_scratch.activations[l],
                      rig.target_view.scratch.pre_activations[l],
                      rig.target_view.scratch.activations[l]});
    for (const float* buffer : {hidden[l].online_z, hidden[l].online_a, hidden[l].target_z,
                                hidden[l].target_a}) {
      DeviceBuffer<float>& poisoned = rig.buffer_at(buffer);
      poisoned.upload(test::nn_support::nans(poisoned.size()));
    }
  }

  rig.launch(d_states, d_actions, d_rewards, d_dones, d_weights.data());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);

  const bool relu = fc.activation == kernels::ActivationKind::Relu;
  std::size_t w_at = 0;  // layer l's weight in the flat layout: per layer the weight, the bias
  std::vector<float> online_x(states.begin(), states.end());
  std::vector<float> target_x(states.begin() + static_cast<std::ptrdiff_t>(b * obs), states.end());
  for (std::size_t l = 1; l < layers; ++l) {
    const std::size_t in = fc.widths[l - 1], out = fc.widths[l];
    const bool pairs = kd::dqn_fused_step_forward_pairs(b, out, rig.grid);
    std::printf("    %s, layer %zu (K %zu, %zu outputs), grid %u: online rows %zu in %s\n", fc.name,
                l, in, out, rig.grid, 2 * b, pairs ? "64 x 32 pairs" : "32 x 32 tiles");
    if (fc.pairs[l - 1] >= 0)
      EXPECT_EQ(pairs, fc.pairs[l - 1] == 1) << fc.name << ": the case's tiling at layer " << l;
    const float* w = online_params.data() + w_at;
    const float* tw = target_params.data() + w_at;
    const ForwardLayerBits online =
        emulate_forward_layer(online_x.data(), 2 * b, w, w + out * in, in, out);
    const ForwardLayerBits target =
        emulate_forward_layer(target_x.data(), b, tw, tw + out * in, in, out);
    const Hidden& h = hidden[l - 1];
    const std::string at = std::string(fc.name) + ", layer " + std::to_string(l);
    const std::vector<float> online_a = rig.buffer_at(h.online_a).download();
    const std::vector<float> target_a = rig.buffer_at(h.target_a).download();
    expect_bits(rig.buffer_at(h.online_z).download(), online.z, "online z (bits), " + at);
    expect_bits(rig.buffer_at(h.target_z).download(), target.z, "target z (bits), " + at);
    if (relu) {
      expect_bits(online_a, online.a, "online a (bits), " + at);
      expect_bits(target_a, target.a, "target a (bits), " + at);
    }
    online_x = online_a;  // the next layer's input: the GPU's (checked above for ReLU)
    target_x = target_a;
    w_at += in * out + out;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tilings, DqnFusedStepForward,
    ::testing::Values(
        // On an H200 (132 blocks): 64 + 64 items per layer instead of 128 + 64 tiles.
        ForwardCase{{64, 256, 256, 3}, 256, kernels::ActivationKind::Relu, 0, {-1, -1},
                    "bench_shape_device_grid"},
        // 400 online rows: the last pair's first half has 16 rows, its second half none; on an
        // H200 pairs (56 + 56 items on 132 blocks; 104 + 56 tiles would take two rounds).
        ForwardCase{{64, 256, 256, 3}, 200, kernels::ActivationKind::Relu, 0, {-1, -1},
                    "batch_200_device_grid"},
        // Forced on any device: layer 1 (K 70: a partial second chunk) in pairs (14 + 14 items
        // on 30 blocks, 26 + 14 tiles would not fit), layer 2 in tiles (13 + 7 fit).
        ForwardCase{{70, 64, 32, 4}, 200, kernels::ActivationKind::Relu, 30, {1, 0},
                    "batch_200_pairs_then_tiles_30_blocks"},
        // 34 online rows on 4 blocks: one pair per column, its second half 2 rows (2 + 2 items;
        // 4 + 2 tiles would take two rounds).
        ForwardCase{{4, 64, 64, 2}, 17, kernels::ActivationKind::Relu, 4, {1, 1},
                    "batch_17_pairs_second_half_2_rows_4_blocks"},
        ForwardCase{{4, 64, 64, 2}, 17, kernels::ActivationKind::Tanh, 4, {1, 1},
                    "batch_17_pairs_tanh_z_only_4_blocks"},
        // Two online rows, one target row: 32 x 32 tiles (a pair would be as many items).
        ForwardCase{{64, 256, 256, 3}, 1, kernels::ActivationKind::Relu, 0, {0, 0},
                    "batch_1_tiles"}),
    [](const ::testing::TestParamInfo<ForwardCase>& info) { return std::string(info.param.name); });

// The CPU emulation of the forward tiles' order (the bit-for-bit oracle above) on random fp32
// inputs, 67 rows x 40 outputs for K = 1, 70 (a partial chunk) and 256 (four chunks): z agrees
// with the double-precision dot products to fp32 rounding and a = relu(z); and it can tell
// orders apart: with the groups added in reverse or k summed in one chain, some outputs' bits
// differ (K > 16), so the GPU check would fail if the kernel's slice order changed. No GPU.
TEST(DqnFusedStepForwardEmulation, AgreesWithDoublesAndTellsOrdersApart) {
  const std::size_t rows = 67, out = 40;
  std::mt19937_64 rng(5150);
  for (const std::size_t in : {std::size_t{1}, std::size_t{70}, std::size_t{256}}) {
    const std::vector<float> x = random_floats(rows * in, -1.0f, 1.0f, rng);
    const std::vector<float> w = random_floats(out * in, -0.5f, 0.5f, rng);
    const std::vector<float> bias = random_floats(out, -0.2f, 0.2f, rng);
    const ForwardLayerBits got =
        emulate_forward_layer(x.data(), rows, w.data(), bias.data(), in, out);
    std::vector<double> z(rows * out);
    std::size_t zero_a = 0;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t o = 0; o < out; ++o) {
        double sum = bias[o];
        for (std::size_t k = 0; k < in; ++k)
          sum += static_cast<double>(x[r * in + k]) * w[o * in + k];
        z[r * out + o] = sum;
        const float gz = got.z[r * out + o], ga = got.a[r * out + o];
        EXPECT_EQ(ga, gz > 0.0f ? gz : 0.0f) << "K " << in << ": a = relu(z)";
        zero_a += ga == 0.0f;
      }
    expect_close(got.z, z, {1e-5, 1e-5}, "emulated z, K " + std::to_string(in));
    EXPECT_GT(zero_a, 0u) << "K " << in << ": some a must be cut to 0";
    for (const SumOrder order : {SumOrder::GroupsReversed, SumOrder::Sequential}) {
      const ForwardLayerBits other =
          emulate_forward_layer(x.data(), rows, w.data(), bias.data(), in, out, order);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < got.z.size(); ++i)
        differ += std::bit_cast<std::uint32_t>(got.z[i]) != std::bit_cast<std::uint32_t>(other.z[i]);
      const char* name = order == SumOrder::Sequential ? "one chain" : "groups reversed";
      std::printf("    K %3zu: %zu of %zu z differ in bits with %s\n", in, differ, got.z.size(),
                  name);
      if (in > 16)
        EXPECT_GT(differ, got.z.size() / 20) << "K " << in << ", " << name;
      else
        EXPECT_EQ(differ, 0u) << "K " << in << ": one product per output, any order";
    }
  }
}

// The CPU emulation of the head's order (the bit-for-bit oracle above) against the double-precision
// references on random fp32 inputs, 37 rows x (in 70, 5 actions), IS weights, one done in three:
// its Q vectors, targets, TD errors, dL/dq and dz_{L-1} agree to fp32 rounding (no GPU needed).
TEST(DqnFusedStepHeadEmulation, AgreesWithTheDoublePrecisionReferences) {
  const std::size_t b = 37, in = 70, actions = 5;
  std::mt19937_64 rng(4242);
  const std::vector<float> online_a = random_floats(2 * b * in, 0.0f, 1.0f, rng);
  const std::vector<float> target_a = random_floats(b * in, 0.0f, 1.0f, rng);
  const std::vector<float> online_z = random_floats(2 * b * in, -1.0f, 1.0f, rng);
  const std::vector<float> online_w = random_floats(actions * in, -0.2f, 0.2f, rng);
  const std::vector<float> online_bias = random_floats(actions, -0.2f, 0.2f, rng);
  const std::vector<float> target_w = random_floats(actions * in, -0.2f, 0.2f, rng);
  const std::vector<float> target_bias = random_floats(actions, -0.2f, 0.2f, rng);
  const std::vector<float> rewards = random_floats(b, -1.0f, 1.0f, rng);
  const std::vector<float> weights = random_floats(b, 0.2f, 1.0f, rng);
  std::vector<std::int32_t> acts(b);
  std::vector<std::uint8_t> dones(b);
  for (std::size_t i = 0; i < b; ++i) {
    acts[i] = static_cast<std::int32_t>(rng() % actions);
    dones[i] = (rng() % 3) == 0;
  }
  const kd::DqnFusedConstants constants{0.97f, 0.5f, 0.5f};
  const HeadBits got = emulate_head({b, in, actions, online_a, target_a, online_z, online_w,
                                     online_bias, target_w, target_bias, acts, rewards, dones,
                                     &weights, constants, /*relu=*/true});

  const auto q_of = [&](const std::vector<float>& a, std::size_t first_row,
                        const std::vector<float>& w, const std::vector<float>& bias) {
    std::vector<double> q(b * actions);
    for (std::size_t r = 0; r < b; ++r)
      for (std::size_t o = 0; o < actions; ++o) {
        double sum = bias[o];
        for (std::size_t k = 0; k < in; ++k)
          sum += static_cast<double>(a[(first_row + r) * in + k]) * w[o * in + k];
        q[r * actions + o] = sum;
      }
    return q;
  };
  const std::vector<double> q = q_of(online_a, 0, online_w, online_bias);
  const std::vector<double> q_next = q_of(online_a, b, online_w, online_bias);
  const std::vector<double> q_target = q_of(target_a, 0, target_w, target_bias);
  const std::vector<double> targets = reference::dqn::double_dqn_target(
      q_next, q_target, to_double(rewards), dones, actions, constants.discount,
      constants.reward_scale);
  const reference::dqn::TdError td = reference::dqn::td_error(q, acts, targets, actions);
  std::vector<double> d_taken(b);
  reference::huber_loss_backward(b, 1, td.q_taken, targets, to_double(weights), constants.delta,
                                 1.0, d_taken, reference::GradMode::Overwrite);
  const std::vector<double> d_q = reference::dqn::action_value_grad(d_taken, acts, actions);
  std::vector<double> dz(b * in);
  for (std::size_t r = 0; r < b; ++r)
    for (std::size_t c = 0; c < in; ++c) {
      double sum = 0.0;
      for (std::size_t o = 0; o < actions; ++o) sum += d_q[r * actions + o] * online_w[o * in + c];
      dz[r * in + c] = online_z[r * in + c] > 0.0f ? sum : 0.0;
    }
  expect_close(got.td, td.td, {1e-5, 1e-4}, "emulated td errors");
  expect_close(got.dq, d_q, {1e-7, 1e-5}, "emulated dL/dq");
  expect_close(got.dz, dz, {1e-7, 1e-4}, "emulated dz_L-1");
}

// Invalid DQN arguments are refused on the host, naming the value and the limit (no GPU needed).
TEST(DqnFusedStepArguments, InvalidArgumentsNameTheValueAndTheLimit) {
  test::fused_step_support::DummyViews views;
  std::int32_t action = 0;
  kd::DqnFusedTarget target;
  target.network = views.mlp;
  target.scratch = views.scratch;
  target.params = views.state[4];
  const kd::DqnFusedBatch batch{views.dummy, &action, views.dummy, views.mask, nullptr};
  const auto expect_refused = [&](const kd::DqnFusedTarget& t, const kd::DqnFusedConstants& k,
                                  const std::string& needle) {
    test::fused_step_support::expect_refused(
        [&] {
          kd::launch_dqn_train_step_fused({views.dummy, views.dummy}, views.mlp, views.scratch, t,
                                          views.optimizer, batch, 8, k, 1, nullptr);
        },
        needle);
  };
  const kd::DqnFusedConstants ok{0.99f, 1.0f, 1.0f};
  kd::DqnFusedTarget bad = target;
  bad.tau = 0.0f;
  expect_refused(bad, ok, "tau = 0.000000, allowed (0, 1]");
  bad = target;
  bad.period = 0;
  expect_refused(bad, ok, "period = 0, allowed >= 1");
  bad = target;
  bad.network.widths[1] = 9;
  expect_refused(bad, ok, "width 1 of the target network is 9, the online one's 8");
  expect_refused(target, {0.99f, 1.0f, -1.0f}, "delta = -1.000000, allowed finite and > 0");
  expect_refused(target, {0.99f, 1.0f, INFINITY}, "delta = inf");
  bad = target;
  bad.network.layers = 3;
  expect_refused(bad, ok, "the target network has 3 layers, the online one 2");
  bad = target;
  bad.network.hidden_activation.kind = kernels::ActivationKind::Tanh;
  expect_refused(bad, ok, "hidden activation differs");
  bad = target;
  bad.network.weights[1] = nullptr;
  expect_refused(bad, ok, "target layer 1: a weight or bias view is null");
  bad = target;
  bad.scratch.activations[0] = nullptr;
  expect_refused(bad, ok, "target hidden layer 0");
  bad = target;
  bad.params = views.state[4] + 1;
  expect_refused(bad, ok, "not 16-byte aligned");
  bad = target;
  bad.params = views.state[0];
  expect_refused(bad, ok, "alias the online params");
  test::fused_step_support::expect_refused(
      [&] {
        kd::launch_dqn_train_step_fused({nullptr, views.dummy}, views.mlp, views.scratch, target,
                                        views.optimizer, batch, 8, ok, 1, nullptr);
      },
      "td_errors is null");
  test::fused_step_support::expect_refused(
      [&] {
        kd::launch_dqn_train_step_fused({views.dummy, views.dummy}, views.mlp, views.scratch,
                                        target, views.optimizer,
                                        {views.dummy, nullptr, views.dummy, views.mask, nullptr}, 8,
                                        ok, 1, nullptr);
      },
      "a batch view (states, actions, rewards or dones) is null");
}

}  // namespace
