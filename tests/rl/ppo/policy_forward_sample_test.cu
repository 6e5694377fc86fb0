// launch_policy_forward_sample against its definition: launch_fused_mlp_forward then
// launch_sample_actions on separate, identically poisoned outputs. Every output must have the
// same bits: the hidden activations, the logits, actions [rows], the whole rollout arrays
// (row t = counter % T written, the others still poisoned) and the step slot. Shapes: the PPO
// actor 4-64-64-2 at 1, 33, 4096 rows (one tile per block) and 40000 rows (several tiles per
// block: the other block shape), 3 actions, a 2-layer net with widths that are not multiples of
// 4; counters 0 and 7 with T = 5. Fresh random weights and inputs per case. The sampler's
// distribution itself is tested in ppo_kernels_test (chi-square with a negative control); equal
// bits carry it over. Invalid arguments throw naming the launcher (CPU test).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/nn/mlp_forward_fused.h"
#include "kernels/rl/ppo/policy_forward_sample.h"
#include "kernels/rl/ppo/sample_actions.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "tests/nn/nn_test_support.h"
#include "tests/support/bitwise.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident;
namespace kp = resident::kernels::ppo;
using test::download;
using test::same_bits;
using test::nn_support::nans;
using test::nn_support::random_floats;

constexpr std::size_t kSteps = 5;
constexpr std::int32_t kPoisonAction = -7;
constexpr std::uint64_t kPoisonSlot = 0xdeadbeefULL;

// One MLP's device outputs and the sampler's, poisoned.
struct Outputs {
  std::vector<DeviceBuffer<float>> z, a;
  DeviceBuffer<std::int32_t> actions, stored_actions;
  DeviceBuffer<float> stored_log_prob;
  DeviceBuffer<std::uint64_t> step_slot{1};

  Outputs(const std::vector<std::size_t>& widths, std::size_t rows)
      : actions(rows), stored_actions(kSteps * rows), stored_log_prob(kSteps * rows) {
    for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
      z.emplace_back(rows * widths[l + 1]);
      a.emplace_back(rows * widths[l + 1]);
      z.back().upload(nans(rows * widths[l + 1]));
      a.back().upload(nans(rows * widths[l + 1]));
    }
    actions.upload(std::vector<std::int32_t>(rows, kPoisonAction));
    stored_actions.upload(std::vector<std::int32_t>(kSteps * rows, kPoisonAction));
    stored_log_prob.upload(nans(kSteps * rows));
    step_slot.upload(std::vector<std::uint64_t>{kPoisonSlot});
  }

  kp::SampleStore store() {
    return {stored_actions.data(), stored_log_prob.data(), step_slot.data(), kSteps};
  }
};

struct Case {
  std::vector<std::size_t> widths;
  std::size_t rows;
};

class PolicyForwardSample
    : public ::testing::TestWithParam<std::tuple<Case, std::uint64_t>> {};

TEST_P(PolicyForwardSample, EqualsTheForwardThenTheSamplerBitForBit) {
  RESIDENT_REQUIRE_GPU();
  const Case& c = std::get<0>(GetParam());
  const std::uint64_t counter_value = std::get<1>(GetParam());
  const std::size_t layers = c.widths.size() - 1, rows = c.rows, actions = c.widths.back();
  std::printf("  %zu layers, %zu actions, rows %zu, counter %llu\n", layers, actions, rows,
              static_cast<unsigned long long>(counter_value));
  std::mt19937_64 rng(rows * 7919 + layers * 31 + actions + counter_value);
  Stream stream;
  DeviceBuffer<float> x(rows * c.widths[0]);
  x.upload(random_floats(rows * c.widths[0], -1.0f, 1.0f, rng));
  std::vector<DeviceBuffer<float>> w, b;
  for (std::size_t l = 0; l < layers; ++l) {
    w.emplace_back(c.widths[l + 1] * c.widths[l]);
    b.emplace_back(c.widths[l + 1]);
    w.back().upload(random_floats(c.widths[l + 1] * c.widths[l], -1.0f, 1.0f, rng));
    b.back().upload(random_floats(c.widths[l + 1], -0.5f, 0.5f, rng));
  }
  DeviceBuffer<std::uint64_t> counter(1);
  counter.upload(std::vector<std::uint64_t>{counter_value});
  const std::uint64_t seed = rng();
  Outputs separate(c.widths, rows), fused(c.widths, rows);
  const auto describe = [&](Outputs& out) {
    kernels::FusedMlp mlp;
    mlp.layers = static_cast<unsigned>(layers);
    for (std::size_t l = 0; l <= layers; ++l) mlp.widths[l] = static_cast<unsigned>(c.widths[l]);
    for (std::size_t l = 0; l < layers; ++l)
      mlp.layer[l] = {w[l].data(), b[l].data(), l + 1 < layers ? nullptr : out.z[l].data(),
                      l + 1 < layers ? out.a[l].data() : nullptr};
    return mlp;
  };
  const kernels::Activation tanh_activation{kernels::ActivationKind::Tanh};
  kernels::launch_fused_mlp_forward(describe(separate), x.data(), rows, tanh_activation,
                                    stream.get());
  kp::launch_sample_actions(separate.actions.data(), separate.store(),
                            separate.z.back().data(), rows, actions, seed, counter.data(),
                            stream.get());
  kp::launch_policy_forward_sample(describe(fused), x.data(), rows, tanh_activation,
                                   fused.actions.data(), fused.store(), seed, counter.data(),
                                   stream.get());
  stream.synchronize();

  for (std::size_t l = 0; l + 1 < layers; ++l)
    EXPECT_TRUE(same_bits(fused.a[l].download(), separate.a[l].download(),
                          "layer " + std::to_string(l) + " a"));
  EXPECT_TRUE(same_bits(fused.z.back().download(), separate.z.back().download(), "logits"));
  const std::vector<std::int32_t> drawn = fused.actions.download();
  EXPECT_TRUE(same_bits(drawn, separate.actions.download(), "actions"));
  EXPECT_TRUE(same_bits(fused.stored_actions.download(), separate.stored_actions.download(),
                        "stored actions"));
  EXPECT_TRUE(same_bits(fused.stored_log_prob.download(), separate.stored_log_prob.download(),
                        "stored log-probs"));
  EXPECT_TRUE(same_bits(download(fused.step_slot.data(), 1), std::vector{counter_value},
                        "step slot"));
  // The definition's own outputs are real draws (so equal bits are not equal poison).
  std::size_t in_range = 0;
  for (const std::int32_t a : drawn) in_range += a >= 0 && a < static_cast<std::int32_t>(actions);
  EXPECT_EQ(in_range, rows);
  const std::vector<float> log_prob = separate.stored_log_prob.download();
  const std::size_t t = counter_value % kSteps;
  for (std::size_t r = 0; r < rows; ++r)
    ASSERT_TRUE(std::isfinite(log_prob[t * rows + r]) && log_prob[t * rows + r] <= 0.0f)
        << "log-prob of row " << r;
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<Case, std::uint64_t>>& info) {
  std::string name = "w";
  for (const std::size_t w : std::get<0>(info.param).widths) name += "_" + std::to_string(w);
  return name + "_rows" + std::to_string(std::get<0>(info.param).rows) + "_counter" +
         std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PolicyForwardSample,
    ::testing::Combine(::testing::Values(Case{{4, 64, 64, 2}, 1}, Case{{4, 64, 64, 2}, 33},
                                         Case{{4, 64, 64, 2}, 4096},
                                         Case{{4, 64, 64, 2}, 40013}, Case{{4, 64, 64, 3}, 100},
                                         Case{{6, 10, 5}, 65}),
                       ::testing::Values(std::uint64_t{0}, std::uint64_t{7})),
    case_name);

// The checks come before any launch: no GPU needed.
TEST(PolicyForwardSample, InvalidArgumentsNameTheLauncher) {
  float dummy = 0.0f;
  std::int32_t action = 0;
  std::uint64_t counter = 0;
  kernels::FusedMlp mlp;  // 0 layers
  const kernels::Activation tanh_activation{kernels::ActivationKind::Tanh};
  const auto message = [&](kp::SampleStore store) {
    try {
      kp::launch_policy_forward_sample(mlp, &dummy, 1, tanh_activation, &action, store, 1,
                                       &counter, nullptr);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string no_steps = message({nullptr, nullptr, nullptr, 0});
  EXPECT_NE(no_steps.find("launch_policy_forward_sample"), std::string::npos) << no_steps;
  EXPECT_NE(no_steps.find("steps = 0"), std::string::npos) << no_steps;
  const std::string no_layers = message({nullptr, nullptr, nullptr, kSteps});
  EXPECT_NE(no_layers.find("launch_policy_forward_sample"), std::string::npos) << no_layers;
  EXPECT_NE(no_layers.find("layers = 0"), std::string::npos) << no_layers;
  float log_prob = 0.0f;
  const std::string half_store = message({nullptr, &log_prob, nullptr, kSteps});
  EXPECT_NE(half_store.find("both set or both null"), std::string::npos) << half_store;
  std::int32_t* const no_actions = nullptr;
  try {
    kp::launch_policy_forward_sample(mlp, &dummy, 1, tanh_activation, no_actions,
                                     {nullptr, nullptr, nullptr, kSteps}, 1, &counter, nullptr);
    ADD_FAILURE() << "null actions accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("actions and counter must be set"), std::string::npos)
        << e.what();
  }
}

}  // namespace
