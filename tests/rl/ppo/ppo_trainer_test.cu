// The PPO trainer on the GPU: a captured rollout step and a captured minibatch update replay
// bit for bit like eager ones (and a whole-update graph like an eager update); the trainer's
// GAE wiring against the CPU reference on its own rollout; the audit contract of a resident
// update (0 bulk D2H, 0 H2D, 3 scalar D2H: the two losses and the episodic-return summary) and
// the host-staged update's round trips; checkpoint resume bit-identical to an uninterrupted run,
// and bad checkpoints refused with nothing changed; the learning-rate annealing on the device
// (with total_updates = 1 the second update of a captured graph runs at lr 0: params unchanged bit
// for bit while AdamW's moments move); learning: CartPole's running mean return
// reaches 475 within 1M env steps for 3 seeds on CleanRL's classic setting (4 envs x 128 steps).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <vector>

#include "audit/testing.h"
#include "audit/tracer.h"
#include "kernels/core/error.h"
#include "lib/core/captured_graph.h"
#include "lib/rl/ppo/cartpole_vector_env.h"
#include "lib/rl/ppo/ppo_trainer.h"
#include "tests/nn/nn_test_support.h"
#include "tests/reference/gae_reference.h"
#include "tests/support/file_bytes.h"
#include "tests/support/gpu.h"
#include "tests/support/param_name.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace resident;
using namespace resident::ppo;
using test::nn_support::bit_identical;

template <class T>
std::vector<T> fetch(const T* device, std::size_t n, cudaStream_t stream) {
  std::vector<T> host(n);
  if (cudaMemcpyAsync(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
      cudaStreamSynchronize(stream) != cudaSuccess)
    ADD_FAILURE() << "copy failed";
  return host;
}

struct Snapshot {
  std::vector<float> observations, values, log_prob, advantages, returns, params, m, v, metrics;
  std::vector<std::int32_t> actions;
  std::vector<std::uint64_t> counters;
};

Snapshot snapshot(PpoTrainer& t) {
  const PpoConfig& c = t.config();
  const std::size_t n = c.env_count, steps = c.rollout_steps, d = 4;
  const PpoRolloutView r = t.rollout();
  const cudaStream_t s = t.stream();
  return {fetch(r.observations, (steps + 1) * n * d, s), fetch(r.values, (steps + 1) * n, s),
          fetch(r.log_prob, steps * n, s), fetch(r.advantages, steps * n, s),
          fetch(r.returns, steps * n, s), t.slab().download(nn::SlabPart::Params, s),
          t.slab().download(nn::SlabPart::AdamM, s), t.slab().download(nn::SlabPart::AdamV, s),
          fetch(t.update_metrics(), kernels::ppo::kPpoMetrics, s), fetch(r.actions, steps * n, s),
          fetch(t.device_counters(), 3, s)};
}

void expect_identical(const Snapshot& a, const Snapshot& b, const char* what) {
  EXPECT_TRUE(bit_identical(a.observations, b.observations)) << what << ": observations";
  EXPECT_TRUE(bit_identical(a.values, b.values)) << what << ": values";
  EXPECT_TRUE(bit_identical(a.log_prob, b.log_prob)) << what << ": log_prob";
  EXPECT_TRUE(bit_identical(a.advantages, b.advantages)) << what << ": advantages";
  EXPECT_TRUE(bit_identical(a.returns, b.returns)) << what << ": returns";
  EXPECT_TRUE(bit_identical(a.params, b.params)) << what << ": params";
  EXPECT_TRUE(bit_identical(a.m, b.m)) << what << ": AdamW m";
  EXPECT_TRUE(bit_identical(a.v, b.v)) << what << ": AdamW v";
  EXPECT_TRUE(bit_identical(a.metrics, b.metrics)) << what << ": update metrics";
  EXPECT_EQ(a.actions, b.actions) << what << ": actions";
  EXPECT_EQ(a.counters, b.counters) << what << ": device counters";
}

PpoConfig small_config() {
  PpoConfig c;
  c.env_count = 64;
  c.rollout_steps = 32;
  c.epochs = 2;
  c.minibatches = 4;
  c.total_updates = 10;
  c.seed = 3;
  c.use_graphs = false;
  return c;
}

TEST(PpoTrainerGraphs, CapturedRolloutStepAndMinibatchEqualEagerBitForBit) {
  RESIDENT_REQUIRE_GPU();
  const PpoConfig c = small_config();
  CartPoleVectorEnv env_eager(c.env_count), env_graph(c.env_count), env_whole(c.env_count);
  PpoTrainer eager(c, env_eager), graphed(c, env_graph);
  PpoConfig whole_config = c;
  whole_config.use_graphs = true;
  PpoTrainer whole(whole_config, env_whole);
  CapturedGraph step_graph, minibatch_graph;
  step_graph.capture(graphed.stream(), [&] { graphed.rollout_step(); });
  minibatch_graph.capture(graphed.stream(), [&] { graphed.minibatch_update(); });
  for (int update = 0; update < 3; ++update) {
    eager.begin_rollout();
    graphed.begin_rollout();
    for (std::size_t t = 0; t < c.rollout_steps; ++t) {
      eager.rollout_step();
      step_graph.launch(graphed.stream());
    }
    eager.finish_rollout();
    graphed.finish_rollout();
    for (std::size_t e = 0; e < c.epochs; ++e) {
      eager.begin_epoch();
      graphed.begin_epoch();
      for (std::size_t m = 0; m < c.minibatches; ++m) {
        eager.minibatch_update();
        minibatch_graph.launch(graphed.stream());
      }
    }
    eager.finish_update();
    graphed.finish_update();
    const PpoUpdateResult a = eager.read_update_result();
    const PpoUpdateResult b = graphed.read_update_result();
    const PpoUpdateResult w = whole.train_update();  // one graph for the whole update
    EXPECT_EQ(a.policy_loss, b.policy_loss);
    EXPECT_EQ(a.value_loss, w.value_loss);
    EXPECT_EQ(a.episodes, w.episodes);
    std::printf("  update %d: policy loss %.6f, value loss %.6f, %u episodes, mean return %.2f\n",
                update, a.policy_loss, a.value_loss, a.episodes, a.mean_episode_return);
    EXPECT_TRUE(std::isfinite(a.policy_loss) && std::isfinite(a.value_loss));
  }
  const Snapshot se = snapshot(eager);
  expect_identical(se, snapshot(graphed), "per-piece graphs vs eager");
  expect_identical(se, snapshot(whole), "whole-update graph vs eager");
}

TEST(PpoTrainerAnnealing, TheLrReachesZeroAfterTotalUpdatesWithoutRecapture) {
  RESIDENT_REQUIRE_GPU();
  PpoConfig c = small_config();
  c.total_updates = 1;  // update 0 at learning_rate, update 1 at 0
  c.use_graphs = true;  // one graph, captured in update 0, replayed in update 1
  ASSERT_EQ(c.weight_decay, 0.0) << "at lr 0 the params stay put only without weight decay";
  CartPoleVectorEnv env(c.env_count);
  PpoTrainer trainer(c, env);
  const cudaStream_t s = trainer.stream();
  const std::vector<float> p0 = trainer.slab().download(nn::SlabPart::Params, s);
  trainer.train_update();
  const std::vector<float> p1 = trainer.slab().download(nn::SlabPart::Params, s),
                           m1 = trainer.slab().download(nn::SlabPart::AdamM, s);
  trainer.train_update();
  const std::vector<float> p2 = trainer.slab().download(nn::SlabPart::Params, s),
                           m2 = trainer.slab().download(nn::SlabPart::AdamM, s);
  EXPECT_FALSE(bit_identical(p0, p1)) << "update 0 runs at the base learning rate";
  EXPECT_TRUE(bit_identical(p1, p2)) << "update 1 runs at lr 0";
  EXPECT_FALSE(bit_identical(m1, m2)) << "AdamW's moments still advance at lr 0";
  EXPECT_EQ(trainer.slab().read_step(s), 2 * c.epochs * c.minibatches);
  std::printf("  total_updates 1: update 0 moved the params, update 1 (lr 0) left them bit for "
              "bit; %zu AdamW steps\n",
              2 * c.epochs * c.minibatches);
}

TEST(PpoTrainerRollout, GaeOfTheTrainersRolloutMatchesTheReference) {
  RESIDENT_REQUIRE_GPU();
  PpoConfig c = small_config();
  c.normalize_advantages = false;
  c.rollout_steps = 60;  // random-policy CartPole episodes last ~20 steps: many terminations
  CartPoleVectorEnv env(c.env_count);
  PpoTrainer t(c, env);
  t.begin_rollout();
  for (std::size_t s = 0; s < c.rollout_steps; ++s) t.rollout_step();
  t.finish_rollout();
  const std::size_t T = c.rollout_steps, N = c.env_count;
  const PpoRolloutView r = t.rollout();
  const cudaStream_t s = t.stream();
  const auto rewards = fetch(r.rewards, T * N, s);
  const auto values = fetch(r.values, (T + 1) * N, s);
  const auto finals = fetch(r.final_values, T * N, s);
  const auto terminated = fetch(r.terminated, T * N, s);
  const auto truncated = fetch(r.truncated, T * N, s);
  std::size_t ends = 0;
  for (auto x : terminated) ends += x;
  EXPECT_GT(ends, N / 2) << "the rollout should contain terminations";
  const std::vector<double> rd(rewards.begin(), rewards.end()), vd(values.begin(), values.end()),
      fd(finals.begin(), finals.end());
  const auto ref = reference::compute_gae({T, N, rd, vd, terminated, truncated, fd}, c.gamma, c.gae_lambda);
  test::nn_support::expect_close(fetch(r.advantages, T * N, s), ref.advantages, {1e-4, 1e-4}, "advantages");
  test::nn_support::expect_close(fetch(r.returns, T * N, s), ref.returns, {1e-4, 1e-4}, "returns");
  // The stored observation rows: row t + 1 of an env that did not end is its next state.
  const auto obs = fetch(r.observations, (T + 1) * N * 4, s);
  for (float x : obs) ASSERT_TRUE(std::isfinite(x));
}

TEST(PpoTrainerAudit, ResidentUpdateKeepsItsContractHostStagedRoundTrips) {
  RESIDENT_REQUIRE_GPU();
  PpoConfig c = small_config();
  c.env_count = 256;
  for (bool graphs : {true, false}) {
    c.use_graphs = graphs;
    CartPoleVectorEnv env(c.env_count);
    PpoTrainer t(c, env);
    (void)t.train_update();  // warm-up (captures the graph)
    auto& tracer = audit::Tracer::instance();
    tracer.start();
    tracer.reset();
    {
      const audit::Phase phase("ppo/update");
      (void)t.train_update();
    }
    const audit::AuditReport report = tracer.snapshot();
    RESIDENT_EXPECT_WITHIN_CONTRACT(
        report, (std::vector<audit::TransferContract>{{.phase = "ppo/update", .max_d2h_scalar = 3,
                                                       .max_d2h_bulk = 0, .max_h2d = 0,
                                                       .max_syncs = 3}}));
    const audit::PhaseReport* p = report.find("ppo/update");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->counters.d2h_scalar, 3u) << "two losses and the episodic-return summary";
  }
  c.mode = PpoMode::HostStaged;
  CartPoleVectorEnv env(c.env_count);
  PpoTrainer t(c, env);
  auto& tracer = audit::Tracer::instance();
  tracer.reset();
  PpoUpdateResult r;
  {
    const audit::Phase phase("ppo/host_staged_update");
    r = t.train_update();
  }
  const audit::AuditReport report = tracer.snapshot();
  const audit::PhaseReport* p = report.find("ppo/host_staged_update");
  ASSERT_NE(p, nullptr);
  std::printf("  host-staged update: %llu bulk D2H, %llu H2D, %llu scalar D2H, %llu syncs\n",
              static_cast<unsigned long long>(p->counters.d2h_bulk),
              static_cast<unsigned long long>(p->counters.h2d),
              static_cast<unsigned long long>(p->counters.d2h_scalar),
              static_cast<unsigned long long>(p->counters.syncs()));
  EXPECT_GE(p->counters.d2h_bulk, 3 * c.rollout_steps) << "per-step softmax/values/obs downloads";
  EXPECT_GE(p->counters.h2d, c.rollout_steps + 6 * c.epochs * c.minibatches);
  EXPECT_GE(p->counters.d2h_scalar, 2 * c.epochs * c.minibatches) << "losses per minibatch";
  EXPECT_TRUE(std::isfinite(r.policy_loss) && std::isfinite(r.value_loss));
}

class PpoTrainerCheckpoint : public ::testing::Test {
 protected:
  test::TempDir temp_{"ppo_checkpoint"};  // this test's own directory (ctest runs tests in parallel)
  const std::filesystem::path dir_ = temp_.path();
};

TEST_F(PpoTrainerCheckpoint, ResumeIsBitIdenticalAndBadFilesChangeNothing) {
  RESIDENT_REQUIRE_GPU();
  std::filesystem::create_directories(dir_);
  for (PpoMode mode : {PpoMode::Resident, PpoMode::HostStaged}) {
    PpoConfig c = small_config();
    c.use_graphs = true;
    c.mode = mode;
    CartPoleVectorEnv env_a(c.env_count), env_b(c.env_count);
    PpoTrainer a(c, env_a);
    for (int u = 0; u < 2; ++u) (void)a.train_update();
    const auto path = dir_ / "a.ckpt";
    a.save(path);
    std::vector<PpoUpdateResult> tail_a;
    for (int u = 0; u < 3; ++u) tail_a.push_back(a.train_update());

    PpoTrainer b(c, env_b);  // a fresh trainer, then resumed
    b.load(path);
    EXPECT_EQ(b.updates_done(), 2u);
    for (int u = 0; u < 3; ++u) {
      const PpoUpdateResult r = b.train_update();
      EXPECT_EQ(r.policy_loss, tail_a[u].policy_loss);
      EXPECT_EQ(r.value_loss, tail_a[u].value_loss);
      EXPECT_EQ(r.episodes, tail_a[u].episodes);
    }
    expect_identical(snapshot(a), snapshot(b), "resumed vs uninterrupted");

    // A corrupt file and another configuration's file: errors, and b is unchanged.
    const Snapshot before = snapshot(b);
    std::vector<std::byte> bytes = test::read_file_bytes(path);
    bytes[bytes.size() / 2] ^= std::byte{0x10};
    const auto corrupt = dir_ / "corrupt.ckpt";
    test::write_file_bytes(corrupt, bytes);
    try {
      b.load(corrupt);
      ADD_FAILURE() << "a corrupt checkpoint loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.error_name(), "corrupt checkpoint") << e.what();
    }
    PpoConfig other = c;
    other.learning_rate = 1e-3;
    CartPoleVectorEnv env_c(c.env_count);
    PpoTrainer t_other(other, env_c);
    const auto other_path = dir_ / "other.ckpt";
    t_other.save(other_path);
    try {
      b.load(other_path);
      ADD_FAILURE() << "another configuration's checkpoint loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.error_name(), "checkpoint mismatch") << e.what();
    }
    expect_identical(before, snapshot(b), "after refused loads");
  }
}

// CleanRL's ppo.py setting for CartPole-v1: 4 envs x 128 steps, 4 epochs x 4 minibatches,
// lr 2.5e-4 annealed, gamma 0.99, lambda 0.95, clip 0.2, entropy 0.01, value 0.5, grad norm 0.5.
// Running mean: the mean return of the last 100 episodes (an update reports the mean and count
// of the episodes that ended in its rollout; each counts with that mean).
class PpoLearning : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(PpoLearning, CartPoleReaches475Within1MEnvSteps) {
  RESIDENT_REQUIRE_GPU();
  PpoConfig c;
  c.seed = GetParam();
  const std::size_t budget = 1000000, per_update = c.env_count * c.rollout_steps;
  c.total_updates = budget / per_update;
  CartPoleVectorEnv env(c.env_count);
  PpoTrainer trainer(c, env);
  std::deque<double> last_returns;  // at most 100
  double running = 0.0;
  std::size_t steps = 0;
  const auto start = std::chrono::steady_clock::now();
  bool solved = false;
  for (std::size_t u = 0; u < c.total_updates && !solved; ++u) {
    const PpoUpdateResult r = trainer.train_update();
    steps += per_update;
    ASSERT_TRUE(std::isfinite(r.policy_loss) && std::isfinite(r.value_loss)) << "update " << u;
    for (std::uint32_t e = 0; e < r.episodes; ++e) {
      last_returns.push_back(static_cast<double>(r.mean_episode_return));
      if (last_returns.size() > 100) last_returns.pop_front();
    }
    if (last_returns.size() == 100) {
      double sum = 0.0;
      for (const double v : last_returns) sum += v;
      running = sum / 100.0;
    }
    if (u % 50 == 0)
      std::printf("  seed %llu: %7zu steps, last-100 mean %6.1f, policy loss %+.4f, value loss %.4f\n",
                  static_cast<unsigned long long>(c.seed), steps, running, r.policy_loss, r.value_loss);
    solved = running >= 475.0;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("  seed %llu: %s at %zu env steps (last-100 mean %.1f), %.1f s\n",
              static_cast<unsigned long long>(c.seed), solved ? "reached 475" : "did NOT reach 475",
              steps, running, seconds);
  EXPECT_TRUE(solved);
}

INSTANTIATE_TEST_SUITE_P(Seeds, PpoLearning, ::testing::Values(1, 2, 3), [](const auto& test_case) {
  return test::param_name("seed", test_case.param);
});

}  // namespace
