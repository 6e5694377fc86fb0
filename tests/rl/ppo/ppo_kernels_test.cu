// The PPO kernels against their double-precision references on fresh random inputs, outputs
// poisoned with NaN before each run: sampling (chi-square of the action frequencies against the
// softmax, with a negative control the same test rejects; stored log-probs; actions equal to the
// CPU replica of the draw), GAE with terminations and truncations, advantage normalization, the
// device permutation (exact), the clipped loss, its gradients and metrics (also through the
// categorical backward to the logits), the fused categorical loss (the same bits as the
// categorical forward -> loss -> categorical backward sequence), and the transition store and
// minibatch gather (exact).
// (The learning-rate annealing is the slab's AdamW schedule: tests/nn/adamw_test.cu.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/core/philox.h"
#include "kernels/nn/categorical.h"
#include "kernels/rl/ppo/categorical_ppo_loss.h"
#include "kernels/rl/ppo/gae.h"
#include "kernels/rl/ppo/gather_minibatch.h"
#include "kernels/rl/ppo/normalize_advantages.h"
#include "kernels/rl/ppo/permutation.h"
#include "kernels/rl/ppo/ppo_loss.h"
#include "kernels/rl/ppo/sample_actions.h"
#include "kernels/rl/ppo/store_transition.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "tests/nn/nn_test_support.h"
#include "tests/reference/gae_reference.h"
#include "tests/reference/nn_reference.h"
#include "tests/reference/philox_reference.h"
#include "tests/reference/ppo_reference.h"
#include "tests/stats/chi_square.h"
#include "tests/support/device_vectors.h"
#include "tests/support/gpu.h"
#include "tests/support/param_name.h"

namespace {

using namespace resident;
namespace kp = resident::kernels::ppo;
using test::nn_support::expect_close;
using test::nn_support::nans;
using test::nn_support::random_floats;
using test::nn_support::to_double;
using test::nn_support::Tolerance;

std::vector<double> softmax(const std::vector<float>& logits) {
  double m = -INFINITY, s = 0.0;
  for (float x : logits) m = std::max(m, static_cast<double>(x));
  std::vector<double> p;
  for (float x : logits) s += std::exp(x - m);
  for (float x : logits) p.push_back(std::exp(x - m) / s);
  return p;
}

// ----- sampling

// R rows share one logits row (each row is its own Philox subsequence, so the draws are
// independent); three launches at counters 0, 1, 2 pool 3R draws.
TEST(PpoSampleActions, FrequenciesMatchTheSoftmaxAndANegativeControlIsRejected) {
  RESIDENT_REQUIRE_GPU();
  const std::size_t rows = 200000, cols = 5;
  const std::vector<float> row = {0.3f, -1.2f, 1.1f, 0.0f, -0.4f};
  std::vector<float> logits;
  for (std::size_t r = 0; r < rows; ++r) logits.insert(logits.end(), row.begin(), row.end());
  StreamContext ctx;
  DeviceBuffer<float> d_logits = test::to_device(logits);
  DeviceBuffer<std::int32_t> d_actions(rows), d_stored(3 * rows);
  DeviceBuffer<float> d_log_prob = test::to_device(nans(3 * rows));
  DeviceBuffer<std::uint64_t> d_counter = test::to_device(std::vector<std::uint64_t>{0}), d_slot(1);
  const std::uint64_t seed = mix_seed(7, 99);
  std::vector<std::uint64_t> counts(cols, 0);
  std::size_t replica_mismatches = 0;
  for (std::uint64_t k = 0; k < 3; ++k) {
    d_counter.upload(std::vector<std::uint64_t>{k});
    kp::launch_sample_actions(d_actions.data(), {d_stored.data(), d_log_prob.data(), d_slot.data(), 3},
                              d_logits.data(), rows, cols, seed, d_counter.data(), ctx.stream());
    ctx.synchronize();
    const std::vector<std::int32_t> a = d_actions.download();
    EXPECT_EQ(d_slot.download()[0], k);
    for (std::size_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(a[r] >= 0 && a[r] < static_cast<int>(cols));
      ++counts[static_cast<std::size_t>(a[r])];
      if (r < 20000) {  // the CPU replica of the draw, in double
        const double u = static_cast<double>(reference::curand_philox_draw(seed, r, 4 * k, 0) >> 8) *
                         0x1p-24;
        if (reference::sample_categorical(to_double(row), u) != a[r]) ++replica_mismatches;
      }
    }
  }
  // float vs double cumulative sums may disagree only for u within ~1e-7 of a boundary.
  EXPECT_LE(replica_mismatches, 2u) << "actions differ from the CPU replica of the draw";
  const std::vector<double> p = softmax(row);
  const double total = 3.0 * static_cast<double>(rows);
  std::vector<double> expected, wrong;
  for (double pc : p) expected.push_back(total * pc);
  // Negative control: the softmax at temperature 1.05 (a 1-2% shift per class).
  std::vector<float> tempered;
  for (float x : row) tempered.push_back(x / 1.05f);
  for (double pc : softmax(tempered)) wrong.push_back(total * pc);
  const auto good = stats::chi_square_goodness_of_fit(counts, expected);
  const auto bad = stats::chi_square_goodness_of_fit(counts, wrong);
  std::printf("  chi-square vs softmax: %.2f (p = %.3f); vs tempered control: %.1f (p = %.2g)\n",
              good.statistic, good.p_value, bad.statistic, bad.p_value);
  EXPECT_GT(good.p_value, 0.01);
  EXPECT_LT(bad.p_value, 0.01) << "the test cannot tell a 5% temperature change";

  // Stored log-probs: row t = k of [3, rows].
  const std::vector<std::int32_t> stored = d_stored.download();
  const std::vector<float> lp = d_log_prob.download();
  std::vector<double> want(lp.size());
  for (std::size_t i = 0; i < lp.size(); ++i) want[i] = std::log(p[static_cast<std::size_t>(stored[i])]);
  expect_close(lp, want, {1e-6, 1e-5}, "stored log_prob");
}

TEST(PpoSampleActions, ProbabilitiesMatchTheSoftmax) {
  RESIDENT_REQUIRE_GPU();
  for (std::size_t cols : {1u, 2u, 7u}) {
    const std::size_t rows = 1025;
    std::mt19937_64 rng(cols);
    const std::vector<float> logits = random_floats(rows * cols, -4.0f, 4.0f, rng);
    StreamContext ctx;
    DeviceBuffer<float> d_logits = test::to_device(logits), d_p = test::to_device(nans(rows * cols));
    kp::launch_policy_probabilities(d_p.data(), d_logits.data(), rows, cols, ctx.stream());
    ctx.synchronize();
    std::vector<double> want;
    for (std::size_t r = 0; r < rows; ++r) {
      const auto p = softmax({logits.begin() + static_cast<long>(r * cols),
                              logits.begin() + static_cast<long>((r + 1) * cols)});
      want.insert(want.end(), p.begin(), p.end());
    }
    expect_close(d_p.download(), want, {1e-7, 1e-5}, "probabilities");
  }
}

// ----- GAE and normalization

class PpoGae : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t>> {};

TEST_P(PpoGae, MatchesTheReferenceWithTerminationsAndTruncations) {
  RESIDENT_REQUIRE_GPU();
  const auto [steps, envs] = GetParam();
  std::mt19937_64 rng(steps * 1000 + envs);
  const std::vector<float> rewards = random_floats(steps * envs, -1.0f, 1.0f, rng);
  const std::vector<float> values = random_floats((steps + 1) * envs, -2.0f, 2.0f, rng);
  std::vector<float> final_values = random_floats(steps * envs, -2.0f, 2.0f, rng);
  std::vector<std::uint8_t> terminated(steps * envs), truncated(steps * envs);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (std::size_t i = 0; i < steps * envs; ++i) {
    const double u = unit(rng);
    terminated[i] = u < 0.05;
    truncated[i] = (u >= 0.05 && u < 0.10) || (u >= 0.10 && u < 0.11);  // some with both below
    if (u < 0.01) truncated[i] = 1;  // terminated and truncated: termination wins
    if (!truncated[i] || terminated[i]) final_values[i] = NAN;  // must not be read
  }
  StreamContext ctx;
  DeviceBuffer<float> d_r = test::to_device(rewards), d_v = test::to_device(values), d_f = test::to_device(final_values);
  DeviceBuffer<std::uint8_t> d_term = test::to_device(terminated), d_trunc = test::to_device(truncated);
  DeviceBuffer<float> d_adv = test::to_device(nans(steps * envs)), d_ret = test::to_device(nans(steps * envs));
  const float gamma = 0.99f, lambda = 0.95f;
  kp::launch_gae(d_adv.data(), d_ret.data(), d_r.data(), d_v.data(), d_term.data(),
                 d_trunc.data(), d_f.data(), steps, envs, gamma, lambda, ctx.stream());
  ctx.synchronize();
  const std::vector<double> r = to_double(rewards), v = to_double(values), f = to_double(final_values);
  const auto ref = reference::compute_gae({steps, envs, r, v, terminated, truncated, f},
                                          static_cast<double>(gamma), static_cast<double>(lambda));
  // fp32 recursion over up to T terms of magnitude <= ~5, each rounded once or twice.
  const Tolerance tol{2e-5 * static_cast<double>(std::min<std::size_t>(steps, 64)), 1e-5};
  expect_close(d_adv.download(), ref.advantages, tol, "advantages");
  expect_close(d_ret.download(), ref.returns, tol, "returns");
}

INSTANTIATE_TEST_SUITE_P(Shapes, PpoGae,
                         ::testing::Values(std::make_tuple(1, 1), std::make_tuple(7, 33),
                                           std::make_tuple(128, 4), std::make_tuple(128, 1000),
                                           std::make_tuple(500, 129)),
                         [](const auto& test_case) {
                           const auto& p = test_case.param;
                           return test::param_name("steps", std::get<0>(p), "envs", std::get<1>(p));
                         });

TEST(PpoNormalizeAdvantages, MatchesTheReferenceAcrossTheReductionSplit) {
  RESIDENT_REQUIRE_GPU();
  for (std::size_t n : {1u, 2047u, 2048u, 2049u, 524288u, 3000001u}) {
    std::mt19937_64 rng(n);
    const std::vector<float> a = random_floats(n, -3.0f, 5.0f, rng);
    StreamContext ctx;
    DeviceBuffer<float> d_a = test::to_device(a);
    DeviceBuffer<double> partials = test::to_device(std::vector<double>(kp::normalize_partials_count(n), NAN));
    kp::launch_normalize_advantages(d_a.data(), partials.data(), partials.size(), n, 1e-8f,
                                    ctx.stream());
    ctx.synchronize();
    const std::vector<float> got = d_a.download();
    expect_close(got, reference::normalize_advantages(to_double(a), 1e-8), {1e-6, 1e-5},
                 "normalized n=" + std::to_string(n));
    // Deterministic: a second run gives the same bits.
    d_a.upload(a);
    kp::launch_normalize_advantages(d_a.data(), partials.data(), partials.size(), n, 1e-8f,
                                    ctx.stream());
    ctx.synchronize();
    EXPECT_TRUE(test::nn_support::bit_identical(got, d_a.download()));
  }
}

// ----- permutation

TEST(PpoPermutation, EqualsTheReferenceExactly) {
  RESIDENT_REQUIRE_GPU();
  for (std::size_t n : {1u, 255u, 4096u, 100003u}) {
    StreamContext ctx;
    DeviceBuffer<std::uint32_t> keys_in(n), keys_out(n), values_in(n), perm(n);
    DeviceBuffer<std::byte> temp(kp::permutation_temp_bytes(n));
    const kp::PermutationScratch scratch{keys_in.data(), keys_out.data(), values_in.data(),
                                         temp.data(), temp.size()};
    DeviceBuffer<std::uint64_t> counter = test::to_device(std::vector<std::uint64_t>{13});
    const std::uint64_t seed = mix_seed(3, 5);
    // counter 13, divisor 4: draw 3.
    kp::launch_random_permutation(perm.data(), scratch, n, seed, counter.data(), 4, ctx.stream());
    ctx.synchronize();
    EXPECT_EQ(perm.download(), reference::random_permutation(n, seed, 3)) << "n = " << n;
  }
}

// ----- loss

// Random PPO loss inputs for `batch` rows of `cols` logits in [-range, range]: old log-probs
// near the current ones (so that both clip branches and both sides occur), values near the old.
struct LossInputs {
  std::vector<float> logits;
  std::vector<std::int32_t> actions;
  std::vector<float> old_lp, adv, ret, old_v, v;
  LossInputs(std::size_t batch, std::size_t cols, float range, std::mt19937_64& rng)
      : logits(random_floats(batch * cols, -range, range, rng)), actions(batch), old_lp(batch),
        v(batch) {
    for (auto& a : actions) a = static_cast<std::int32_t>(rng() % cols);
    const std::vector<double> lp_ref =
        reference::categorical_log_prob(batch, cols, to_double(logits), actions);
    const std::vector<float> noise = random_floats(batch, -0.45f, 0.45f, rng);
    for (std::size_t i = 0; i < batch; ++i) old_lp[i] = static_cast<float>(lp_ref[i]) + noise[i];
    adv = random_floats(batch, -2.0f, 2.0f, rng);
    ret = random_floats(batch, -3.0f, 3.0f, rng);
    old_v = random_floats(batch, -3.0f, 3.0f, rng);
    const std::vector<float> dv = random_floats(batch, -0.4f, 0.4f, rng);
    for (std::size_t i = 0; i < batch; ++i) v[i] = old_v[i] + dv[i];
  }
};

class PpoLossKernel : public ::testing::TestWithParam<std::tuple<std::size_t, bool>> {};

TEST_P(PpoLossKernel, LossGradientsAndMetricsMatchTheReference) {
  RESIDENT_REQUIRE_GPU();
  const auto [batch, clip_values] = GetParam();
  const std::size_t cols = 3;
  std::mt19937_64 rng(batch + (clip_values ? 1 : 0));
  const LossInputs in(batch, cols, 1.5f, rng);
  const auto& [logits, actions, old_lp, adv, ret, old_v, v] = in;

  StreamContext ctx;
  DeviceBuffer<float> d_logits = test::to_device(logits), d_old_lp = test::to_device(old_lp), d_adv = test::to_device(adv),
                      d_ret = test::to_device(ret), d_old_v = test::to_device(old_v), d_v = test::to_device(v);
  DeviceBuffer<std::int32_t> d_actions = test::to_device(actions);
  DeviceBuffer<float> d_lp = test::to_device(nans(batch)), d_ent = test::to_device(nans(batch));
  DeviceBuffer<float> g_lp = test::to_device(nans(batch)), g_ent = test::to_device(nans(batch)), g_v = test::to_device(nans(batch));
  DeviceBuffer<float> d_dlogits = test::to_device(nans(batch * cols));
  DeviceBuffer<float> metrics = test::to_device(nans(kp::kPpoMetrics));
  DeviceBuffer<float> sums = test::to_device(std::vector<float>(kp::kPpoMetrics, 1.0f));
  DeviceBuffer<float> partials = test::to_device(nans(kp::ppo_loss_blocks(batch) * kp::kPpoMetrics));
  DeviceBuffer<std::uint64_t> counter = test::to_device(std::vector<std::uint64_t>{41});
  const kp::PpoLossCoefficients k{0.2f, clip_values, 0.01f, 0.5f};
  kernels::launch_categorical_forward(d_lp.data(), d_ent.data(), d_logits.data(), d_actions.data(),
                                      batch, cols, ctx.stream());
  kp::launch_ppo_loss({g_lp.data(), g_ent.data(), g_v.data()}, metrics.data(), sums.data(),
                      partials.data(), counter.data(),
                      {d_lp.data(), d_ent.data(), d_v.data(), d_old_lp.data(), d_adv.data(),
                       d_ret.data(), d_old_v.data()},
                      batch, k, ctx.stream());
  kernels::launch_categorical_backward(d_dlogits.data(), d_logits.data(), d_actions.data(),
                                       g_lp.data(), g_ent.data(), batch, cols,
                                       nn::GradMode::Overwrite, ctx.stream());
  ctx.synchronize();

  // The reference on the GPU's own log-probs and entropies (so that only the loss is compared),
  // and the end-to-end gradient w.r.t. the logits on the reference's.
  const std::vector<double> lp = to_double(d_lp.download()), ent = to_double(d_ent.download());
  const std::vector<double> vd = to_double(v), old_lpd = to_double(old_lp), advd = to_double(adv),
                            retd = to_double(ret), old_vd = to_double(old_v);
  const reference::PpoLossCoefficients rk{0.2, clip_values, 0.01, 0.5};
  const auto ref = reference::ppo_loss({lp, ent, vd, old_lpd, advd, retd, old_vd}, rk);
  // A ratio within fp32 rounding of a clip boundary may pick the other branch in fp32 than in
  // double: such rows (|r - (1 +- c)| < 1e-5, a handful in 10^5) are compared with the GPU's own
  // values, and counted.
  std::vector<float> got_lp = g_lp.download();
  std::vector<double> want_lp = ref.d_log_prob;
  std::size_t boundary_rows = 0;
  for (std::size_t i = 0; i < batch; ++i) {
    const double r = std::exp(lp[i] - old_lpd[i]);
    if (std::fabs(r - 0.8) < 1e-5 || std::fabs(r - 1.2) < 1e-5) {
      want_lp[i] = got_lp[i];
      ++boundary_rows;
    }
  }
  EXPECT_LE(boundary_rows * 1000, batch + 1000) << "too many rows at a clip boundary";
  const double inv = 1.0 / static_cast<double>(batch);
  expect_close(got_lp, want_lp, {1e-6 * inv, 1e-5}, "d_log_prob");
  expect_close(g_ent.download(), ref.d_entropy, {0.0, 1e-6}, "d_entropy");
  expect_close(g_v.download(), ref.d_value, {1e-6 * inv, 1e-5}, "d_value");
  const std::vector<float> m = metrics.download();
  const std::vector<double> want_m = {ref.policy_loss, ref.value_loss, ref.entropy, ref.approx_kl,
                                      ref.clip_fraction};
  // fp32 row terms summed in fp32 per block, blocks in fp64.
  expect_close(m, want_m, {1e-6, 1e-4}, "metrics");
  std::vector<double> want_sums;
  for (float x : m) want_sums.push_back(1.0 + x);
  expect_close(sums.download(), want_sums, {1e-6, 1e-6}, "metric sums");
  EXPECT_EQ(counter.download()[0], 42u);

  // Through the categorical backward: the reference backward (double logits) of the upstream
  // gradients the reference loss gives.
  std::vector<double> d_logits_ref(batch * cols, 0.0);
  const std::vector<double> logits_d = to_double(logits);
  reference::categorical_log_prob_backward(batch, cols, logits_d, actions, want_lp, d_logits_ref,
                                           reference::GradMode::Overwrite);
  reference::categorical_entropy_backward(batch, cols, logits_d, ref.d_entropy, d_logits_ref,
                                          reference::GradMode::Accumulate);
  expect_close(d_dlogits.download(), d_logits_ref, {2e-6 * inv, 1e-4}, "d_logits");
}

INSTANTIATE_TEST_SUITE_P(Shapes, PpoLossKernel,
                         ::testing::Combine(::testing::Values(1, 255, 1024, 1025, 131072),
                                            ::testing::Bool()),
                         [](const auto& test_case) {
                           const auto& p = test_case.param;
                           return test::param_name(
                               "batch", std::get<0>(p),
                               test::flag(std::get<1>(p), "clipped_values", "unclipped_values"));
                         });

// ----- the fused categorical loss

std::vector<std::uint32_t> bits(const std::vector<float>& v) {
  std::vector<std::uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

std::size_t non_finite(const std::vector<float>& v) {
  std::size_t n = 0;
  for (float x : v) n += std::isfinite(x) ? 0 : 1;
  return n;
}

// (batch, actions, clip_value_loss). Batches: one row, a partial tile, five blocks of four
// 256-row tiles (the last one partial), 129 blocks of three or four tiles; actions: the row groups
// of 4 (1, 2), 8 (7) lanes and a whole block (1030).
class PpoCategoricalLoss
    : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t, bool>> {};

// The outputs of one loss pass, poisoned (NaN; the running sums start at `sums0`, the counter
// at 41).
struct LossOutputs {
  DeviceBuffer<float> d_value, d_logits, metrics, sums, partials;
  DeviceBuffer<std::uint64_t> counter;
  LossOutputs(std::size_t batch, std::size_t cols, const std::vector<float>& sums0,
              std::size_t partials_count)
      : d_value(test::to_device(nans(batch))),
        d_logits(test::to_device(nans(batch * cols))),
        metrics(test::to_device(nans(kp::kPpoMetrics))),
        sums(test::to_device(sums0)),
        partials(test::to_device(nans(partials_count))),
        counter(test::to_device(std::vector<std::uint64_t>{41})) {}
};

TEST_P(PpoCategoricalLoss, EqualsTheThreeKernelSequenceBitForBit) {
  RESIDENT_REQUIRE_GPU();
  const auto [batch, cols, clip_values] = GetParam();
  std::mt19937_64 rng(batch * 7919 + cols * 2 + (clip_values ? 1 : 0));
  const LossInputs in(batch, cols, 2.5f, rng);
  const auto& [logits, actions, old_lp, adv, ret, old_v, v] = in;
  const std::vector<float> sums0 = random_floats(kp::kPpoMetrics, -1.0f, 1.0f, rng);
  const std::size_t partials_count = kp::ppo_loss_blocks(batch) * kp::kPpoMetrics;
  const kp::PpoLossCoefficients k{0.2f, clip_values, 0.01f, 0.5f};

  StreamContext ctx;
  DeviceBuffer<float> d_logits = test::to_device(logits), d_old_lp = test::to_device(old_lp),
                      d_adv = test::to_device(adv), d_ret = test::to_device(ret),
                      d_old_v = test::to_device(old_v), d_v = test::to_device(v);
  DeviceBuffer<std::int32_t> d_actions = test::to_device(actions);

  // The three-kernel sequence, then the fused pass, each into its own poisoned outputs.
  LossOutputs want(batch, cols, sums0, partials_count), got(batch, cols, sums0, partials_count);
  DeviceBuffer<float> lp = test::to_device(nans(batch)), ent = test::to_device(nans(batch));
  DeviceBuffer<float> g_lp = test::to_device(nans(batch)), g_ent = test::to_device(nans(batch));
  kernels::launch_categorical_forward(lp.data(), ent.data(), d_logits.data(), d_actions.data(),
                                      batch, cols, ctx.stream());
  kp::launch_ppo_loss({g_lp.data(), g_ent.data(), want.d_value.data()}, want.metrics.data(),
                      want.sums.data(), want.partials.data(), want.counter.data(),
                      {lp.data(), ent.data(), d_v.data(), d_old_lp.data(), d_adv.data(),
                       d_ret.data(), d_old_v.data()},
                      batch, k, ctx.stream());
  kernels::launch_categorical_backward(want.d_logits.data(), d_logits.data(), d_actions.data(),
                                       g_lp.data(), g_ent.data(), batch, cols,
                                       nn::GradMode::Overwrite, ctx.stream());
  kp::launch_categorical_ppo_loss(got.d_logits.data(), got.d_value.data(), got.metrics.data(),
                                  got.sums.data(), got.partials.data(), got.counter.data(),
                                  {d_logits.data(), d_actions.data(), d_v.data(), d_old_lp.data(),
                                   d_adv.data(), d_ret.data(), d_old_v.data()},
                                  batch, cols, k, ctx.stream());
  ctx.synchronize();

  const std::vector<float> want_d_logits = want.d_logits.download();
  const std::vector<float> got_d_logits = got.d_logits.download();
  const std::vector<float> want_d_value = want.d_value.download();
  const std::vector<float> got_d_value = got.d_value.download();
  const std::vector<float> want_m = want.metrics.download(), got_m = got.metrics.download();
  std::printf("  batch %zu, %zu actions, clip_value_loss %d: %zu d_logits, %zu d_value, "
              "%zu partials, %zu metrics compared bit for bit (policy loss %.6g, clip fraction "
              "%.3g)\n",
              batch, cols, clip_values ? 1 : 0, got_d_logits.size(), got_d_value.size(),
              partials_count, got_m.size(), static_cast<double>(want_m[kp::kPolicyLoss]),
              static_cast<double>(want_m[kp::kClipFraction]));
  EXPECT_EQ(non_finite(want_d_logits) + non_finite(want_d_value) + non_finite(want_m), 0u)
      << "the three-kernel sequence left a value unwritten or non-finite";
  EXPECT_EQ(bits(got_d_logits), bits(want_d_logits)) << "d_logits";
  EXPECT_EQ(bits(got_d_value), bits(want_d_value)) << "d_value";
  EXPECT_EQ(bits(got.partials.download()), bits(want.partials.download())) << "partials";
  EXPECT_EQ(bits(got_m), bits(want_m)) << "metrics";
  EXPECT_EQ(bits(got.sums.download()), bits(want.sums.download())) << "metric sums";
  EXPECT_EQ(got.counter.download()[0], 42u);
  EXPECT_EQ(want.counter.download()[0], 42u);
}

INSTANTIATE_TEST_SUITE_P(Shapes, PpoCategoricalLoss,
                         ::testing::Combine(::testing::Values(1, 33, 5000),
                                            ::testing::Values(1, 2, 7, 1030), ::testing::Bool()),
                         [](const auto& test_case) {
                           const auto& p = test_case.param;
                           return test::param_name(
                               "batch", std::get<0>(p), "actions", std::get<1>(p),
                               test::flag(std::get<2>(p), "clipped_values", "unclipped_values"));
                         });
INSTANTIATE_TEST_SUITE_P(Large, PpoCategoricalLoss,
                         ::testing::Combine(::testing::Values(131073), ::testing::Values(2, 7),
                                            ::testing::Bool()),
                         [](const auto& test_case) {
                           const auto& p = test_case.param;
                           return test::param_name(
                               "batch", std::get<0>(p), "actions", std::get<1>(p),
                               test::flag(std::get<2>(p), "clipped_values", "unclipped_values"));
                         });

TEST(PpoCategoricalLoss, RejectsAnEmptyBatchNoActionsAndANonPositiveClip) {
  const kp::CategoricalPpoLossInputs none{};
  const kp::PpoLossCoefficients k{};
  kp::PpoLossCoefficients no_clip{};
  no_clip.clip = 0.0f;
  EXPECT_THROW(kp::launch_categorical_ppo_loss(nullptr, nullptr, nullptr, nullptr, nullptr,
                                               nullptr, none, 0, 2, k, nullptr),
               Error);
  EXPECT_THROW(kp::launch_categorical_ppo_loss(nullptr, nullptr, nullptr, nullptr, nullptr,
                                               nullptr, none, 4, 0, k, nullptr),
               Error);
  EXPECT_THROW(kp::launch_categorical_ppo_loss(nullptr, nullptr, nullptr, nullptr, nullptr,
                                               nullptr, none, 4, 2, no_clip, nullptr),
               Error);
}

// ----- store, gather

TEST(PpoStoreAndGather, CopyExactly) {
  RESIDENT_REQUIRE_GPU();
  const std::size_t envs = 37, dim = 4, steps = 3, batch = envs * steps / 3, minibatches = 3;
  std::mt19937_64 rng(5);
  StreamContext ctx;
  DeviceBuffer<float> rewards(steps * envs), finals(steps * envs * dim), obs((steps + 1) * envs * dim);
  DeviceBuffer<std::uint8_t> term(steps * envs), trunc(steps * envs);
  obs.upload(nans(obs.size()));
  DeviceBuffer<std::uint64_t> slot = test::to_device(std::vector<std::uint64_t>{0}), counter(1);
  std::vector<float> all_obs(obs.size());
  for (std::size_t t = 0; t < steps; ++t) {
    const std::vector<float> r = random_floats(envs, -1, 1, rng), o = random_floats(envs * dim, -1, 1, rng),
                             f = random_floats(envs * dim, -1, 1, rng);
    std::vector<std::uint8_t> te(envs), tr(envs);
    for (std::size_t n = 0; n < envs; ++n) { te[n] = rng() % 2; tr[n] = rng() % 2; }
    DeviceBuffer<float> dr = test::to_device(r), d_o = test::to_device(o), df = test::to_device(f);
    DeviceBuffer<std::uint8_t> dte = test::to_device(te), dtr = test::to_device(tr);
    slot.upload(std::vector<std::uint64_t>{t + 7 * steps});  // t = slot % T
    kp::launch_store_transition({rewards.data(), term.data(), trunc.data(), finals.data(), obs.data()},
                                {dr.data(), dte.data(), dtr.data(), df.data(), d_o.data()}, envs,
                                dim, steps, slot.data(), counter.data(), ctx.stream());
    ctx.synchronize();
    EXPECT_EQ(counter.download()[0], t + 7 * steps + 1);
    const auto got_r = rewards.download();
    const auto got_o = obs.download();
    const auto got_f = finals.download();
    for (std::size_t n = 0; n < envs; ++n) ASSERT_EQ(got_r[t * envs + n], r[n]);
    for (std::size_t i = 0; i < envs * dim; ++i) {
      ASSERT_EQ(got_o[(t + 1) * envs * dim + i], o[i]);
      ASSERT_EQ(got_f[t * envs * dim + i], f[i]);
    }
    const auto got_te = term.download();
    const auto got_tr = trunc.download();
    for (std::size_t n = 0; n < envs; ++n) {
      ASSERT_EQ(got_te[t * envs + n], te[n]);
      ASSERT_EQ(got_tr[t * envs + n], tr[n]);
    }
  }
  // Gather minibatch 2 (counter 5 % 3) through a known permutation.
  const std::size_t samples = steps * envs;
  std::vector<std::uint32_t> perm(samples);
  for (std::size_t i = 0; i < samples; ++i) perm[i] = static_cast<std::uint32_t>((i * 7 + 3) % samples);
  const std::vector<float> s_obs = random_floats(samples * dim, -1, 1, rng), s_lp = random_floats(samples, -1, 1, rng);
  std::vector<std::int32_t> s_act(samples);
  for (auto& a : s_act) a = static_cast<std::int32_t>(rng() % 5);
  DeviceBuffer<float> d_obs = test::to_device(s_obs), d_lp = test::to_device(s_lp);
  DeviceBuffer<std::int32_t> d_act = test::to_device(s_act);
  DeviceBuffer<std::uint32_t> d_perm = test::to_device(perm);
  DeviceBuffer<float> m_obs = test::to_device(nans(batch * dim)), m_lp = test::to_device(nans(batch)),
                      m_adv = test::to_device(nans(batch)), m_ret = test::to_device(nans(batch)), m_v = test::to_device(nans(batch));
  DeviceBuffer<std::int32_t> m_act(batch);
  DeviceBuffer<std::uint64_t> mb_counter = test::to_device(std::vector<std::uint64_t>{5});
  kp::launch_gather_minibatch({m_obs.data(), m_act.data(), m_lp.data(), m_adv.data(), m_ret.data(), m_v.data()},
                              {d_obs.data(), d_act.data(), d_lp.data(), d_lp.data(), d_lp.data(), d_lp.data()},
                              d_perm.data(), batch, dim, minibatches, mb_counter.data(), ctx.stream());
  ctx.synchronize();
  const auto g_obs = m_obs.download();
  const auto g_act = m_act.download();
  const auto g_lp = m_lp.download();
  for (std::size_t i = 0; i < batch; ++i) {
    const std::size_t j = perm[2 * batch + i];
    ASSERT_EQ(g_act[i], s_act[j]);
    ASSERT_EQ(g_lp[i], s_lp[j]);
    for (std::size_t d = 0; d < dim; ++d) ASSERT_EQ(g_obs[i * dim + d], s_obs[j * dim + d]);
  }
}

}  // namespace
