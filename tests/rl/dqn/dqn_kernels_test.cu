// The DQN kernels on the GPU against the double-precision references (tests/rl/dqn/
// dqn_reference.h): fresh random inputs, outputs poisoned with NaN before each run, sizes at the
// edges (1, a warp/block +- 1, larger than one block). Integer outputs (actions, dones, counters)
// and pure copies must match exactly; float arithmetic within the tolerance each test states.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/rl/dqn/dqn_loss_head.h"
#include "kernels/rl/dqn/dueling_head.h"
#include "kernels/rl/dqn/episode_tracker.h"
#include "kernels/rl/dqn/epoch_summary.h"
#include "kernels/rl/dqn/epsilon_greedy.h"
#include "kernels/rl/dqn/target_update.h"
#include "kernels/rl/dqn/train_metrics.h"
#include "kernels/rl/dqn/transition_assembly.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "tests/nn/nn_test_support.h"
#include "tests/reference/nn_reference.h"
#include "tests/rl/dqn/dqn_reference.h"
#include "tests/support/device_vectors.h"
#include "tests/support/gpu.h"
#include "tests/support/param_name.h"

namespace {

using namespace resident;
namespace kd = resident::kernels::dqn;
namespace ref = resident::reference::dqn;
using test::nn_support::expect_close;
using test::nn_support::nans;
using test::nn_support::random_floats;
using test::nn_support::to_double;
using test::nn_support::Tolerance;

std::vector<std::uint8_t> random_flags(std::size_t n, double p, std::mt19937_64& rng) {
  std::bernoulli_distribution flag(p);
  std::vector<std::uint8_t> v(n);
  for (auto& f : v) f = flag(rng) ? 1 : 0;
  return v;
}

std::vector<std::int32_t> random_actions(std::size_t n, std::size_t a, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int32_t> pick(0, static_cast<std::int32_t>(a) - 1);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = pick(rng);
  return v;
}

class DqnKernelSizes : public ::testing::TestWithParam<std::pair<std::size_t, std::size_t>> {};

TEST_P(DqnKernelSizes, EpsilonGreedyMatchesReferenceExactly) {
  RESIDENT_REQUIRE_GPU();
  const auto [n, a] = GetParam();
  std::mt19937_64 rng(n * 7 + a);
  const std::vector<float> q = random_floats(n * a, -2.0f, 2.0f, rng);
  const kd::EpsilonSchedule schedule{1.0, 0.05, 10 * n};
  const std::uint64_t seed = 0x1234abcdull + n;
  Stream stream;
  auto d_q = test::to_device(q);
  for (std::uint64_t step : {0ull, 3ull, 5ull, 12ull}) {
    auto d_step = test::to_device(std::vector<std::uint64_t>{step});
    auto d_actions = test::to_device(std::vector<std::int32_t>(n, -7));
    kd::launch_epsilon_greedy(d_actions.data(), d_q.data(), n, a, schedule, d_step.data(), seed,
                              stream.get());
    stream.synchronize();
    const auto want = ref::epsilon_greedy(to_double(q), n, a, 1.0, 0.05, 10 * n, step, seed);
    EXPECT_EQ(d_actions.download(), want) << "step " << step;
  }
}

// The fused loss head against the composed references: double-DQN target, TD error, the
// IS-weighted Huber loss (nn reference) and its gradient scattered to the taken action; with
// and without IS weights; the last row of a batch > 1 takes an action outside [0, A) (NaN TD
// error, a zero gradient row).
TEST_P(DqnKernelSizes, LossHeadMatchesReference) {
  RESIDENT_REQUIRE_GPU();
  const auto [b, a] = GetParam();
  std::mt19937_64 rng(b * 13 + a);
  const auto qo = random_floats(b * a, -3.0f, 3.0f, rng), qt = random_floats(b * a, -3.0f, 3.0f, rng);
  const auto q = random_floats(b * a, -3.0f, 3.0f, rng), r = random_floats(b, -1.0f, 1.0f, rng);
  const auto w = random_floats(b, 0.05f, 1.0f, rng);
  const auto dones = random_flags(b, 0.3, rng);
  auto actions = random_actions(b, a, rng);
  const bool invalid_last = b > 1;
  if (invalid_last) actions[b - 1] = static_cast<std::int32_t>(a);
  const float delta = 1.0f, discount = 0.99f, reward_scale = 0.5f;
  Stream stream;
  auto d_qo = test::to_device(qo), d_qt = test::to_device(qt), d_q = test::to_device(q),
       d_r = test::to_device(r), d_w = test::to_device(w);
  auto d_dones = test::to_device(dones);
  auto d_actions = test::to_device(actions);
  // The references, on the rows with a valid action (the reference indexes Q by the action).
  const std::size_t valid = invalid_last ? b - 1 : b;
  const std::vector<double> y = ref::double_dqn_target(to_double(qo), to_double(qt), to_double(r), dones,
                                                       a, static_cast<double>(discount), 0.5);
  const std::span<const std::int32_t> valid_actions(actions.data(), valid);
  const auto taken = ref::td_error(to_double(q), valid_actions, y, a);
  const std::span<const double> y_valid(y.data(), valid);
  for (const bool weighted : {true, false}) {
    const std::string where = weighted ? " (IS weights)" : " (no weights)";
    std::vector<double> weights;
    if (weighted) weights = to_double(w);
    weights.resize(weighted ? b : 0);
    auto d_td = test::to_device(nans(b)), d_loss = test::to_device(nans(1)), d_grad = test::to_device(nans(b * a));
    kd::launch_dqn_loss_head({d_td.data(), d_loss.data(), d_grad.data()},
                             {d_q.data(), d_qo.data(), d_qt.data(), d_actions.data(), d_r.data(),
                              d_dones.data(), weighted ? d_w.data() : nullptr},
                             b, a, discount, reward_scale, delta, stream.get());
    stream.synchronize();
    // Float targets of values below 4 against double: a few ulps, carried into the TD error.
    const Tolerance tol{1e-5, 1e-6};
    std::vector<float> td = d_td.download();
    if (invalid_last) {
      EXPECT_TRUE(std::isnan(td[b - 1])) << where;
      td.pop_back();
    }
    expect_close(td, taken.td, tol, "td_error" + where);
    // The loss is the mean over all b rows; the invalid row's term is NaN on the GPU, so the
    // loss is checked on batches without one, the gradient on every row.
    std::vector<double> d_taken(valid);
    const std::span<const double> w_valid(weights.data(), weighted ? valid : 0);
    reference::huber_loss_backward(valid, 1, taken.q_taken, y_valid, w_valid, delta, 1.0, d_taken,
                                   reference::GradMode::Overwrite);
    for (double& g : d_taken) g *= static_cast<double>(valid) / static_cast<double>(b);  // mean over b
    std::vector<double> grad_want = ref::action_value_grad(d_taken, valid_actions, a);
    grad_want.resize(b * a, 0.0);  // the invalid row: zeros
    expect_close(d_grad.download(), grad_want, {2e-6, 1e-5}, "d_q" + where);  // w/b * td's ulps
    if (!invalid_last)
      expect_close(d_loss.download()[0],
                   reference::huber_loss(b, 1, taken.q_taken, y, weights, delta), {1e-5, 1e-5},
                   "loss" + where);
    else
      EXPECT_TRUE(std::isnan(d_loss.download()[0])) << "loss with a NaN term" << where;
  }
}

TEST(DqnLossHead, RefusesEmptySizesAndBadDelta) {
  const kd::DqnLossHeadOutputs out{};
  const kd::DqnLossHeadInputs in{};
  EXPECT_THROW(kd::launch_dqn_loss_head(out, in, 0, 2, 0.99f, 1.0f, 1.0f, nullptr), Error);
  EXPECT_THROW(kd::launch_dqn_loss_head(out, in, 4, 0, 0.99f, 1.0f, 1.0f, nullptr), Error);
  EXPECT_THROW(kd::launch_dqn_loss_head(out, in, 4, 2, 0.99f, 1.0f, 0.0f, nullptr), Error);
  EXPECT_THROW(kd::launch_dqn_loss_head(out, in, 4, 2, 0.99f, 1.0f,
                                        std::numeric_limits<float>::quiet_NaN(), nullptr), Error);
}

TEST_P(DqnKernelSizes, DuelingHeadMatchesReference) {
  RESIDENT_REQUIRE_GPU();
  const auto [b, a] = GetParam();
  std::mt19937_64 rng(b * 17 + a);
  const auto head = random_floats(b * (a + 1), -2.0f, 2.0f, rng), dq = random_floats(b * a, -1.0f, 1.0f, rng);
  Stream stream;
  auto d_head = test::to_device(head), d_dq = test::to_device(dq), d_q = test::to_device(nans(b * a)),
       d_dhead = test::to_device(nans(b * (a + 1)));
  kd::launch_dueling_forward(d_q.data(), d_head.data(), b, a, stream.get());
  kd::launch_dueling_backward(d_dhead.data(), d_dq.data(), b, a, stream.get());
  stream.synchronize();
  const Tolerance tol{1e-6, 1e-5};  // float sums of A <= 3 terms
  expect_close(d_q.download(), ref::dueling_forward(to_double(head), b, a), tol, "dueling q");
  expect_close(d_dhead.download(), ref::dueling_backward(to_double(dq), b, a), tol, "dueling d_head");
}

TEST_P(DqnKernelSizes, TransitionAssemblyMatchesReferenceExactly) {
  RESIDENT_REQUIRE_GPU();
  const auto [n, d] = GetParam();
  std::mt19937_64 rng(n * 19 + d);
  const auto cur = random_floats(n * d, -1.0f, 1.0f, rng), obs = random_floats(n * d, -1.0f, 1.0f, rng);
  const auto next = random_floats(n * d, -1.0f, 1.0f, rng), fin = random_floats(n * d, -1.0f, 1.0f, rng);
  const auto term = random_flags(n, 0.2, rng), trunc = random_flags(n, 0.2, rng);
  for (bool cartpole_like : {true, false}) {
    Stream stream;
    auto d_cur = test::to_device(cur), d_obs = test::to_device(obs), d_next = test::to_device(next), d_fin = test::to_device(fin);
    auto d_term = test::to_device(term), d_trunc = test::to_device(trunc);
    auto d_states = test::to_device(nans(n * d)), d_next_states = test::to_device(nans(n * d));
    auto d_dones = test::to_device(std::vector<std::uint8_t>(n, 7));
    kd::TransitionSources sources{d_obs.data(), d_next.data(),
                                  cartpole_like ? d_fin.data() : nullptr,
                                  cartpole_like ? d_term.data() : nullptr, d_trunc.data()};
    kd::launch_transition_assembly({d_states.data(), d_next_states.data(), d_dones.data(), d_cur.data()},
                                   sources, n, d, stream.get());
    stream.synchronize();
    const auto want = ref::transition_assembly(
        to_double(cur), to_double(obs), to_double(next),
        cartpole_like ? std::span<const double>(to_double(fin)) : std::span<const double>(),
        cartpole_like ? std::span<const std::uint8_t>(term) : std::span<const std::uint8_t>(), trunc, n, d);
    expect_close(d_states.download(), want.states, {0.0, 0.0}, "states");
    expect_close(d_next_states.download(), want.next_states, {0.0, 0.0}, "next_states");
    expect_close(d_cur.download(), want.current, {0.0, 0.0}, "current_observations");
    EXPECT_EQ(d_dones.download(), want.dones);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, DqnKernelSizes,
                         ::testing::Values(std::pair<std::size_t, std::size_t>{1, 2},
                                           std::pair<std::size_t, std::size_t>{31, 3},
                                           std::pair<std::size_t, std::size_t>{128, 2},
                                           std::pair<std::size_t, std::size_t>{129, 3},
                                           std::pair<std::size_t, std::size_t>{1000, 4},
                                           std::pair<std::size_t, std::size_t>{4096, 2}),
                         [](const auto& test_case) {
                           return test::param_name("rows", test_case.param.first, "cols",
                                                   test_case.param.second);
                         });

TEST(DqnTargetUpdate, HardAndPolyakFollowTheDeviceStep) {
  RESIDENT_REQUIRE_GPU();
  const std::size_t n = 100000 + 3;
  std::mt19937_64 rng(5);
  const auto target = random_floats(n, -1.0f, 1.0f, rng), online = random_floats(n, -1.0f, 1.0f, rng);
  Stream stream;
  for (const auto& [tau, step] : {std::pair{1.0f, 10ull}, std::pair{0.005f, 10ull}, std::pair{1.0f, 7ull}}) {
    auto d_t = test::to_device(target), d_o = test::to_device(online);
    auto d_step = test::to_device(std::vector<std::uint64_t>{step});
    kd::launch_target_update(d_t.data(), d_o.data(), n, tau, 5, d_step.data(), stream.get());
    stream.synchronize();
    const auto want = ref::target_update(to_double(target), to_double(online), tau, 5, step);
    // Polyak in float: t + tau (o - t), a few ulps of values below 1.
    const Tolerance tol = tau == 1.0f ? Tolerance{0.0, 0.0} : Tolerance{1e-7, 1e-6};
    expect_close(d_t.download(), want, tol, tau == 1.0f ? "hard update" : "polyak update");
  }
}

TEST(DqnEpisodeTracker, RingCountersAndSumsMatchReference) {
  RESIDENT_REQUIRE_GPU();
  for (const auto& [n, ring] : {std::pair<std::size_t, std::size_t>{1, 3}, {7, 100}, {1000, 5}, {300, 1000}}) {
    std::mt19937_64 rng(n + ring);
    Stream stream;
    auto d_running = test::to_device(std::vector<float>(n, 0.0f));
    auto d_ring = test::to_device(std::vector<float>(ring, 0.0f));
    auto d_counters = test::to_device(std::vector<std::uint64_t>(kd::kTrackerCounterCount, 0));
    auto d_sum = test::to_device(std::vector<double>{0.0});
    const kd::EpisodeTrackerState state{d_running.data(), d_ring.data(), d_counters.data(), d_sum.data(), ring};
    ref::Tracker tracker{std::vector<double>(n, 0.0), std::vector<double>(ring, 0.0)};
    for (int step = 0; step < 20; ++step) {
      // Rewards in multiples of 1/4 so that float sums are exact and match the double reference.
      std::vector<float> rewards(n);
      std::uniform_int_distribution<int> quarter(-4, 8);
      for (float& r : rewards) r = 0.25f * static_cast<float>(quarter(rng));
      const auto term = random_flags(n, 0.15, rng), trunc = random_flags(n, 0.1, rng);
      auto d_r = test::to_device(rewards);
      auto d_term = test::to_device(term), d_trunc = test::to_device(trunc);
      kd::launch_episode_tracker(state, d_r.data(), d_term.data(), d_trunc.data(), n, stream.get());
      ref::episode_tracker_step(tracker, to_double(rewards), term, trunc);
    }
    stream.synchronize();
    expect_close(d_running.download(), tracker.running, {0.0, 0.0}, "running_return");
    expect_close(d_ring.download(), tracker.ring, {0.0, 0.0}, "recent_returns");
    const auto counters = d_counters.download();
    EXPECT_EQ(counters[kd::kEpisodesCompleted], tracker.episodes);
    EXPECT_EQ(counters[kd::kVectorSteps], tracker.vector_steps);
    EXPECT_EQ(counters[kd::kEpochEpisodes], tracker.epoch_episodes);
    EXPECT_EQ(d_sum.download()[0], tracker.epoch_return_sum);

    // The epoch summary of this tracker (no train steps: NaN loss).
    auto d_loss_sum = test::to_device(std::vector<double>{0.0});
    auto d_train = test::to_device(std::vector<std::uint64_t>(kd::kTrainCounterCount, 0));
    DeviceBuffer<kd::EpochSummary> summary(1);
    DeviceBuffer<kd::EpochStatus> status(1);
    kd::launch_epoch_summary(summary.data(), status.data(), {d_loss_sum.data(), d_train.data()}, state,
                             stream.get());
    stream.synchronize();
    const kd::EpochSummary s = summary.download()[0];
    EXPECT_TRUE(std::isnan(s.mean_loss));
    expect_close(s.mean_recent_return, ref::recent_mean(tracker), {1e-6, 1e-6}, "recent mean");
    EXPECT_EQ(status.download()[0].episodes, tracker.episodes);
    EXPECT_EQ(d_counters.download()[kd::kEpochEpisodes], 0u) << "the summary clears the epoch counts";
  }
}

TEST(DqnTrainMetrics, CountsNonFiniteAndNamesTheFirstStep) {
  RESIDENT_REQUIRE_GPU();
  const std::size_t b = 300;
  Stream stream;
  auto d_loss_sum = test::to_device(std::vector<double>{0.0});
  auto d_counters = test::to_device(std::vector<std::uint64_t>(kd::kTrainCounterCount, 0));
  const kd::TrainMetricsState state{d_loss_sum.data(), d_counters.data()};
  std::mt19937_64 rng(3);
  double loss_sum = 0.0;
  for (int step = 1; step <= 6; ++step) {
    std::vector<float> td = random_floats(b, -1.0f, 1.0f, rng);
    const float loss = 0.125f * static_cast<float>(step);
    if (step == 4) td[b - 1] = std::numeric_limits<float>::infinity();
    if (step == 5) td[0] = std::numeric_limits<float>::quiet_NaN();
    auto d_td = test::to_device(td);
    auto d_loss = test::to_device(std::vector<float>{loss});
    kd::launch_train_metrics(state, d_loss.data(), d_td.data(), b, stream.get());
    stream.synchronize();
    loss_sum += loss;
  }
  const auto c = d_counters.download();
  EXPECT_EQ(c[kd::kGradientSteps], 6u);
  EXPECT_EQ(c[kd::kEpochGradientSteps], 6u);
  EXPECT_EQ(c[kd::kNonFiniteLosses], 0u);
  EXPECT_EQ(c[kd::kNonFiniteTdErrors], 2u);
  EXPECT_EQ(c[kd::kFirstNonFiniteStep], 4u);
  EXPECT_EQ(d_loss_sum.download()[0], loss_sum);
}

}  // namespace
