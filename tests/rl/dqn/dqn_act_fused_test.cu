// The fused DQN acting kernel (kernels/rl/dqn/dqn_act_fused.h) against the references, on fresh
// random networks (non-zero biases) and observations, outputs poisoned first (actions -7, Q NaN).
// Shapes: the DQN bench's 32 x (64-256-256-3) ReLU, CartPole's 1 x (4-64-64-2) ELU, 33 x
// (7-33-4) tanh (two layers; a row and a column past a 32-tile), and 70 x (10-40-30-20-6) GELU
// (four layers) on 3 blocks, so every block takes several tiles and head rows. Grids of at most
// kMostClusterBlocks blocks run as one cluster (cluster barriers): the bench's 8, the bench shape
// on 5, CartPole's, 33 x 7-33-4's and the 3-block case; larger grids cooperatively (grid
// barriers): 70 x 10-40-30-20-6 on the host's grid (9, from its 9 head tiles) and on 12 blocks.
// At three vector steps (epsilon 0.9, 0.585 and 0 on a linear
// schedule): every Q-value against the double-precision forward of the same parameters; every
// action exactly equal to the epsilon-greedy reference (its own Philox) on the kernel's Q-values;
// and where the reference Q-values' best action leads the next by more than the Q tolerance, a
// greedy step's action equals it. Argument checks run without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/nn/mlp_train_step_fused.h"
#include "kernels/rl/dqn/dqn_act_fused.h"
#include "lib/core/device_buffer.h"
#include "lib/nn/mlp.h"
#include "tests/nn/fused_step_test_support.h"
#include "tests/nn/mlp_reference_support.h"
#include "tests/nn/nn_test_support.h"
#include "tests/reference/nn_reference.h"
#include "tests/rl/dqn/dqn_reference.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident;
namespace kd = resident::kernels::dqn;
namespace ref = resident::reference::dqn;
using test::mlp_reference::MlpRig;
using test::nn_support::random_floats;
using test::nn_support::to_double;

struct ActCase {
  std::vector<std::size_t> widths;  // {obs, hidden..., actions}
  std::size_t envs;
  kernels::ActivationKind activation;
  unsigned grid;  // 0: dqn_act_fused_grid's; else this many blocks
  const char* name;
};

void PrintTo(const ActCase& c, std::ostream* os) { *os << c.name; }

class DqnActFused : public ::testing::TestWithParam<ActCase> {};

TEST_P(DqnActFused, ActionsAndQValuesMatchTheReferences) {
  RESIDENT_REQUIRE_GPU();
  const ActCase& c = GetParam();
  const std::size_t n = c.envs, obs = c.widths.front(), actions = c.widths.back();
  const std::size_t layers = c.widths.size() - 1;
  const nn::MlpConfig mlp_config{.widths = c.widths, .hidden_activation = {c.activation}};
  MlpRig rig(mlp_config, n, 303 + n);
  const cudaStream_t stream = rig.context.stream();
  std::mt19937_64 rng(n * 131 + obs);
  for (std::size_t l = 0; l < layers; ++l)  // non-zero biases
    rig.slab.upload(nn::SlabPart::Params, rig.mlp.bias_name(l),
                    random_floats(c.widths[l + 1], -0.3f, 0.3f, rng), stream);

  kernels::FusedStepMlp view;  // weights and biases only: the kernel reads no grads
  view.layers = layers;
  view.hidden_activation = mlp_config.hidden_activation;
  for (std::size_t l = 0; l <= layers; ++l) view.widths[l] = c.widths[l];
  for (std::size_t l = 0; l < layers; ++l) {
    view.weights[l] = rig.slab.param(rig.mlp.weight_name(l));
    view.biases[l] = rig.slab.param(rig.mlp.bias_name(l));
  }
  std::vector<DeviceBuffer<float>> buffers;
  kernels::FusedStepScratch scratch;
  for (std::size_t l = 0; l + 1 < layers; ++l) {
    scratch.pre_activations[l] = buffers.emplace_back(n * c.widths[l + 1]).data();
    scratch.activations[l] = buffers.emplace_back(n * c.widths[l + 1]).data();
  }
  const unsigned grid =
      c.grid != 0 ? c.grid : kd::dqn_act_fused_grid(c.widths, n, mlp_config.hidden_activation);
  const std::uint64_t seed = 0x5eed0000ull + n;
  const double eps_start = 0.9, eps_end = 0.0;
  const std::uint64_t decay = 20 * n;  // env steps: epsilon 0 from vector step 20 on
  rig.context.synchronize();
  const std::vector<double> params =
      test::mlp_reference::flat(rig.mlp, rig.slab.download(nn::SlabPart::Params, stream), rig.slab);
  const auto layers_ref = test::mlp_reference::reference_layers(rig.mlp);
  const test::nn_support::Tolerance q_tolerance{1e-4, 1e-3};

  DeviceBuffer<float> d_obs(n * obs), d_q(n * actions);
  DeviceBuffer<std::int32_t> d_actions(n);
  DeviceBuffer<std::uint64_t> d_step(1);
  for (const std::uint64_t step : {0ull, 7ull, 1000ull}) {
    const std::string at = std::string(c.name) + ", vector step " + std::to_string(step);
    const std::vector<float> observations = random_floats(n * obs, -1.5f, 1.5f, rng);
    d_obs.upload(observations);
    d_step.upload(std::vector<std::uint64_t>{step});
    d_q.upload(test::nn_support::nans(n * actions));
    d_actions.upload(std::vector<std::int32_t>(n, -7));
    kd::launch_dqn_act_fused(d_actions.data(), d_q.data(), view, scratch, d_obs.data(), n,
                             {{eps_start, eps_end, decay}, d_step.data(), seed}, grid, stream);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess) << at;
    const std::vector<float> q = d_q.download();
    const std::vector<std::int32_t> got = d_actions.download();

    const std::vector<double> q_ref = reference::mlp_forward(layers_ref, n, params,
                                                             to_double(observations));
    test::nn_support::expect_close(q, q_ref, q_tolerance, at + ": Q-values");
    EXPECT_EQ(got, ref::epsilon_greedy(to_double(q), n, actions, eps_start, eps_end, decay, step,
                                       seed))
        << at << ": actions against the reference on the kernel's Q-values";
    if (step < 20) continue;  // exploring: the draws decide, checked above
    std::size_t decided = 0;
    for (std::size_t r = 0; r < n; ++r) {
      const double* row = &q_ref[r * actions];
      const std::size_t best = static_cast<std::size_t>(std::max_element(row, row + actions) - row);
      double runner_up = -std::numeric_limits<double>::infinity();
      for (std::size_t a = 0; a < actions; ++a)
        if (a != best) runner_up = std::max(runner_up, row[a]);
      const double margin = 2 * q_tolerance.atol +
                            q_tolerance.rtol * (std::fabs(row[best]) + std::fabs(runner_up));
      if (row[best] - runner_up <= margin) continue;  // a near tie: rounding may decide
      ++decided;
      EXPECT_EQ(got[r], static_cast<std::int32_t>(best)) << at << ", env " << r;
    }
    if (n >= 5) EXPECT_GT(decided, 0u) << at << ": every greedy row was a near tie";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DqnActFused,
    ::testing::Values(
        ActCase{{64, 256, 256, 3}, 32, kernels::ActivationKind::Relu, 0, "bench 32 x 64-256-256-3"},
        ActCase{{4, 64, 64, 2}, 1, kernels::ActivationKind::Elu, 0, "cartpole 1 x 4-64-64-2"},
        ActCase{{7, 33, 4}, 33, kernels::ActivationKind::Tanh, 0, "33 x 7-33-4 tanh"},
        ActCase{{64, 256, 256, 3}, 32, kernels::ActivationKind::Relu, 5,
                "bench 32 x 64-256-256-3 on 5 blocks"},
        ActCase{{10, 40, 30, 20, 6}, 70, kernels::ActivationKind::GeluTanh, 3,
                "70 x 10-40-30-20-6 gelu on 3 blocks"},
        ActCase{{10, 40, 30, 20, 6}, 70, kernels::ActivationKind::GeluTanh, 0,
                "70 x 10-40-30-20-6 gelu on the host's grid"},
        ActCase{{10, 40, 30, 20, 6}, 70, kernels::ActivationKind::GeluTanh, 12,
                "70 x 10-40-30-20-6 gelu on 12 blocks"}),
    [](const ::testing::TestParamInfo<ActCase>& info) {
      std::string name = info.param.name;
      for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

// The host's grids put the cases above on both paths: the bench shape on one cluster (its 8 tiles
// per layer), 70 x 10-40-30-20-6 (9 head tiles) cooperatively.
TEST(DqnActFusedGrid, BenchShapeIsOneClusterAndSeventyRowsAreCooperative) {
  RESIDENT_REQUIRE_GPU();
  using W = std::vector<std::size_t>;
  EXPECT_EQ(kd::dqn_act_fused_grid(W{64, 256, 256, 3}, 32, {}), 8u);
  EXPECT_LE(kd::dqn_act_fused_grid(W{64, 256, 256, 3}, 32, {}), kd::kMostClusterBlocks);
  EXPECT_GT(kd::dqn_act_fused_grid(W{10, 40, 30, 20, 6}, 70, {}), kd::kMostClusterBlocks);
}

// Refused before any device work: each names the offending value.
TEST(DqnActFusedArguments, RefusesBadViewsNamingTheValue) {
  using test::fused_step_support::DummyViews;
  using test::fused_step_support::expect_refused;
  DummyViews v;
  std::int32_t action = 0;
  std::uint64_t step = 0;
  float q[2] = {};
  const kd::DqnActExploration exploration{{1.0, 0.05, 100}, &step, 1};
  const auto launch = [&](const kernels::FusedStepMlp& mlp, const kernels::FusedStepScratch& s,
                          std::int32_t* a, float* qv, const float* x, std::size_t n,
                          const kd::DqnActExploration& e, unsigned grid) {
    return [=] { kd::launch_dqn_act_fused(a, qv, mlp, s, x, n, e, grid, nullptr); };
  };
  expect_refused(launch(v.mlp, v.scratch, &action, q, v.dummy, 0, exploration, 1), "env_count = 0");
  expect_refused(launch(v.mlp, v.scratch, &action, q, v.dummy, (1u << 24) + 1, exploration, 1),
                 "allowed 1 to 2^24");
  expect_refused(launch(v.mlp, v.scratch, &action, q, v.dummy, 1, exploration, 0), "grid = 0");
  expect_refused(launch(v.mlp, v.scratch, nullptr, q, v.dummy, 1, exploration, 1), "actions is null");
  expect_refused(launch(v.mlp, v.scratch, &action, nullptr, v.dummy, 1, exploration, 1),
                 "q_values is null");
  expect_refused(launch(v.mlp, v.scratch, &action, q, nullptr, 1, exploration, 1),
                 "observations is null");
  const kd::DqnActExploration no_step{{1.0, 0.05, 100}, nullptr, 1};
  expect_refused(launch(v.mlp, v.scratch, &action, q, v.dummy, 1, no_step, 1), "vector_step is null");
  kernels::FusedStepMlp one_layer = v.mlp;
  one_layer.layers = 1;
  expect_refused(launch(one_layer, v.scratch, &action, q, v.dummy, 1, exploration, 1),
                 "layers = 1, allowed 2 to 4");
  kernels::FusedStepMlp wide = v.mlp;
  wide.widths[2] = 33;
  expect_refused(launch(wide, v.scratch, &action, q, v.dummy, 1, exploration, 1),
                 "output width = 33");
  kernels::FusedStepMlp no_bias = v.mlp;
  no_bias.biases[1] = nullptr;
  expect_refused(launch(no_bias, v.scratch, &action, q, v.dummy, 1, exploration, 1),
                 "layer 1: a weight or bias view is null");
  kernels::FusedStepScratch no_z = v.scratch;
  no_z.pre_activations[0] = nullptr;
  expect_refused(launch(v.mlp, no_z, &action, q, v.dummy, 1, exploration, 1),
                 "hidden layer 0: a z or a scratch view is null");
  // The grid function refuses what the kernel cannot take, without a device query first.
  const std::vector<std::size_t> too_many_actions{4, 8, 40};
  expect_refused([&] { (void)kd::dqn_act_fused_grid(too_many_actions, 4, {}); }, "outputs");
  const std::vector<std::size_t> fine{4, 8, 2};
  expect_refused([&] { (void)kd::dqn_act_fused_grid(fine, 0, {}); }, "env_count = 0");
}

}  // namespace
