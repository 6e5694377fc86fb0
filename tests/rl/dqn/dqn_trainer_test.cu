// DqnTrainer on the GPU: graph-replayed steps (collection + training) equal eager launches bit
// for bit; the audit contract of a resident epoch (0 bulk D2H, 0 H2D, <= 2 scalar D2H, no sync but
// the readback's two event waits); a host-staged epoch shows its transfers; a non-finite loss
// stops training with an error naming the gradient step; checkpoints resume bit-identically and a
// corrupt or mismatched file changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "audit/testing.h"
#include "audit/tracer.h"
#include "kernels/core/error.h"
#include "lib/rl/dqn/dqn_trainer.h"
#include "tests/support/file_bytes.h"
#include "tests/support/gpu.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace resident;
using namespace resident::dqn;

DqnConfig small_config(DqnEnvKind env, bool dueling) {
  DqnConfig c;
  c.env = env;
  c.env_count = 8;
  c.hidden = {64, 64};
  c.dueling = dueling;
  c.batch = 64;
  c.gradient_steps_per_env_step = 2;
  c.replay_capacity = 20000;
  c.learning_starts = 256;
  c.epsilon = {1.0, 0.05, 2000};
  c.target_update_period = 7;
  c.tau = env == DqnEnvKind::Trading ? 0.05 : 1.0;
  c.steps_per_epoch = 100;
  c.seed = 11;
  if (env == DqnEnvKind::Trading) {
    c.trading.market.steps = 3000;
    c.trading.market.noise_feature_count = 5;  // F = 7, W = 9: 64-dim observations
    c.trading.window = 9;
    c.trading.episode_length = 50;
    c.reward_scale = 100.0f;
  }
  return c;
}

struct Snapshot {
  std::vector<float> online, target, m, v;
  bool operator==(const Snapshot&) const = default;
};

Snapshot snapshot(const DqnTrainer& t) {
  const cudaStream_t s = t.context().stream();
  return {t.online_slab().download(nn::SlabPart::Params, s),
          t.target_slab().download(nn::SlabPart::Params, s),
          t.online_slab().download(nn::SlabPart::AdamM, s),
          t.online_slab().download(nn::SlabPart::AdamV, s)};
}

bool same_bits(const DqnEpochMetrics& a, const DqnEpochMetrics& b) {
  return a.epoch == b.epoch && a.env_steps == b.env_steps && a.gradient_steps == b.gradient_steps &&
         std::memcmp(&a.mean_loss, &b.mean_loss, sizeof(float)) == 0 &&
         std::memcmp(&a.mean_recent_return, &b.mean_recent_return, sizeof(float)) == 0 &&
         a.episodes == b.episodes;
}

// The two trainers' replays hold the same bits: rows, generations, trees and counters.
void expect_same_replay(const DqnTrainer& x, const DqnTrainer& y, const std::string& what) {
  const GpuReplayBuffer& a = *x.gpu_replay();
  const GpuReplayBuffer& b = *y.gpu_replay();
  EXPECT_EQ(a.read_tree_sums(), b.read_tree_sums()) << what;
  const GpuReplayBuffer::TreeExtremes ea = a.read_tree_extremes(), eb = b.read_tree_extremes();
  EXPECT_EQ(ea.max, eb.max) << what;
  EXPECT_EQ(ea.min_positive, eb.min_positive) << what;
  EXPECT_EQ(a.read_leaf_priorities(), b.read_leaf_priorities()) << what;
  const kernels::ReplayCounters ca = a.read_counters(), cb = b.read_counters();
  EXPECT_EQ(ca.step, cb.step) << what;
  EXPECT_EQ(ca.size, cb.size) << what;
  EXPECT_EQ(ca.cursor, cb.cursor) << what;
  EXPECT_EQ(ca.stale, cb.stale) << what;
  EXPECT_EQ(ca.nonfinite + cb.nonfinite + ca.bad_index + cb.bad_index, 0u) << what;
  EXPECT_TRUE(a.save_state() == b.save_state())
      << "replay rows, generations, trees or counters differ; " << what;
}

// Param: 0 CartPole, 1 CartPole with the dueling head, 2 trading (64-dim observations).
class DqnGraphVsEager : public ::testing::TestWithParam<int> {};

TEST_P(DqnGraphVsEager, GraphReplaysEqualEagerStepsBitForBit) {
  RESIDENT_REQUIRE_GPU();
  const DqnEnvKind env = GetParam() == 2 ? DqnEnvKind::Trading : DqnEnvKind::CartPole;
  const bool dueling = GetParam() == 1;
  DqnConfig graphed_config = small_config(env, dueling);
  DqnConfig eager_config = graphed_config;
  eager_config.use_graph = false;
  DqnTrainer graphed(graphed_config), eager(eager_config);
  // The gradient step and acting are the fused kernels except with the dueling head (which
  // they do not take).
  EXPECT_EQ(graphed.fused_train_step(), !dueling);
  EXPECT_EQ(eager.fused_train_step(), !dueling);
  EXPECT_EQ(graphed.fused_acting(), !dueling);
  EXPECT_EQ(eager.fused_acting(), !dueling);
  ASSERT_EQ(snapshot(graphed), snapshot(eager)) << "same seed, same initial state";
  for (int epoch = 0; epoch < 4; ++epoch) {
    const DqnEpochMetrics g = graphed.train_epoch(), e = eager.train_epoch();
    std::printf("  epoch %llu: env steps %llu, gradient steps %llu, loss %.5g, recent return %.4g, "
                "episodes %u\n",
                static_cast<unsigned long long>(g.epoch), static_cast<unsigned long long>(g.env_steps),
                static_cast<unsigned long long>(g.gradient_steps), g.mean_loss, g.mean_recent_return,
                g.episodes);
    ASSERT_TRUE(same_bits(g, e)) << "epoch " << epoch << " metrics differ: loss " << g.mean_loss
                                 << " vs " << e.mean_loss;
  }
  EXPECT_GT(graphed.gradient_steps(), 0u);
  EXPECT_TRUE(snapshot(graphed) == snapshot(eager)) << "graph replays and eager steps diverged";
  EXPECT_EQ(graphed.gpu_replay()->read_leaf_priorities(), eager.gpu_replay()->read_leaf_priorities());
}

INSTANTIATE_TEST_SUITE_P(Envs, DqnGraphVsEager, ::testing::Values(0, 1, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(info.param == 0   ? "CartPole"
                                              : info.param == 1 ? "CartPoleDueling"
                                                                : "Trading");
                         });

// The last priority update of each train step runs beside the next step's collection on a
// second stream, followed there by the next insert's tree work and the next step's first draw
// (its rows, and the insert's, are written after the joins: GpuReplayBuffer::insert_leaves /
// draw_ahead / gather_drawn), and each step's episode tracker
// beside its insert and training (DqnConfig::overlap_side_work): every buffer sees the same
// operations in the same order, so the run is bit-identical to the serial one, which inserts
// with insert_batch (the tracker's episode counts and returns are in the epoch metrics):
// parameters, optimizer state, epoch metrics, and the replay's whole state (rows, generations,
// trees, counters), after epochs that start with an eager step
// and continue with graph replays (and once more fully eager); on the trading env (fused acting
// beside the update) and CartPole with the dueling head (cuBLAS acting beside it). In eager mode
// a missing join would likely still pass (the one-block update ends before the collection, the
// one-block tracker before the insert and training); with graphs a missing join fails the
// capture, and a missing fork loses or reorders the update or the tracker.
TEST(DqnTrainer, SideStreamWorkChangesNothing) {
  RESIDENT_REQUIRE_GPU();
  for (const bool use_graph : {true, false})
  for (const bool dueling : {false, true}) {
    DqnConfig overlapped_config =
        small_config(dueling ? DqnEnvKind::CartPole : DqnEnvKind::Trading, dueling);
    overlapped_config.use_graph = use_graph;
    DqnConfig serial_config = overlapped_config;
    overlapped_config.overlap_side_work = true;
    serial_config.overlap_side_work = false;
    DqnTrainer overlapped(overlapped_config), serial(serial_config);
    for (int epoch = 0; epoch < 4; ++epoch) {
      const DqnEpochMetrics o = overlapped.train_epoch(), s = serial.train_epoch();
      ASSERT_TRUE(same_bits(o, s)) << "epoch " << epoch << ", graphs " << use_graph;
      if (epoch == 3) ASSERT_GT(o.episodes, 0u) << "the tracker must have ended episodes";
    }
    ASSERT_GT(overlapped.gradient_steps(), 0u);
    EXPECT_TRUE(snapshot(overlapped) == snapshot(serial)) << "graphs " << use_graph;
    expect_same_replay(overlapped, serial, "graphs " + std::to_string(use_graph));
  }
}

// Resident steady-state steps replayed DqnConfig::steps_per_graph at a time (7 here: an epoch's
// 99 or 67 steady steps leave a remainder of one-step launches) equal one step per launch bit
// for bit, with the side work on (an epoch's first train step eager, trading env, fused acting)
// and off (every train step steady, CartPole with the dueling head, cuBLAS acting); and the
// launches counted are the ones the documented rule gives: per epoch, S steady steps take
// S / K launches of K steps and S % K one-step launches.
TEST(DqnTrainer, StepsPerGraphChangesNothing) {
  RESIDENT_REQUIRE_GPU();
  for (const bool side_work : {true, false}) {
    DqnConfig one_config = small_config(side_work ? DqnEnvKind::Trading : DqnEnvKind::CartPole,
                                        /*dueling=*/!side_work);
    one_config.overlap_side_work = side_work;
    one_config.steps_per_graph = 1;
    DqnConfig many_config = one_config;
    many_config.steps_per_graph = 7;
    DqnTrainer one(one_config), many(many_config);
    const std::size_t per_epoch = one_config.steps_per_epoch;
    std::uint64_t expected_one = 0, expected_many = 0;
    for (std::size_t epoch = 0; epoch < 4; ++epoch) {
      const DqnEpochMetrics o = one.train_epoch(), m = many.train_epoch();
      ASSERT_TRUE(same_bits(o, m)) << "epoch " << epoch << ", side work " << side_work;
      const std::size_t first = epoch * per_epoch, end = first + per_epoch;
      const std::size_t warmup = one.warmup_vector_steps();
      const std::size_t train_steps = end > std::max(first, warmup) ? end - std::max(first, warmup)
                                                                    : 0;
      // With the side work an epoch's first train step runs eagerly (nothing pending yet).
      const std::size_t steady = side_work && train_steps > 0 ? train_steps - 1 : train_steps;
      expected_one += steady;
      expected_many += steady / 7 + steady % 7;
    }
    EXPECT_EQ(one.graph_launches(), expected_one) << "side work " << side_work;
    EXPECT_EQ(many.graph_launches(), expected_many) << "side work " << side_work;
    EXPECT_LT(many.graph_launches(), one.graph_launches()) << "no multi-step graph was used";
    ASSERT_GT(one.gradient_steps(), 0u);
    EXPECT_EQ(one.gradient_steps(), many.gradient_steps());
    EXPECT_TRUE(snapshot(one) == snapshot(many)) << "side work " << side_work;
    expect_same_replay(one, many, "side work " + std::to_string(side_work));
  }
}

TEST(DqnAudit, ResidentEpochKeepsItsContract) {
  RESIDENT_REQUIRE_GPU();
  DqnTrainer trainer(small_config(DqnEnvKind::Trading, false));
  trainer.train_epoch();  // warm-up ends and the step graph is captured in this epoch
  trainer.train_epoch();
  auto& tracer = audit::Tracer::instance();
  tracer.start();
  tracer.reset();
  {
    const audit::Phase phase("dqn/epoch");
    for (int e = 0; e < 3; ++e) trainer.train_epoch();
  }
  const audit::AuditReport report = tracer.snapshot();
  RESIDENT_EXPECT_WITHIN_CONTRACT(
      report, (std::vector<audit::TransferContract>{
                  {.phase = "dqn/epoch", .max_d2h_scalar = 3 * DqnEpochContract::max_d2h_scalar,
                   .max_d2h_bulk = 0, .max_h2d = 0, .max_syncs = 3 * DqnEpochContract::max_syncs}}));
}

TEST(DqnAudit, HostStagedEpochShowsItsTransfers) {
  RESIDENT_REQUIRE_GPU();
  DqnConfig config = small_config(DqnEnvKind::Trading, false);
  config.pipeline = DqnPipeline::HostStaged;
  DqnTrainer trainer(config);
  trainer.train_epoch();
  trainer.train_epoch();
  auto& tracer = audit::Tracer::instance();
  tracer.start();
  tracer.reset();
  {
    const audit::Phase phase("dqn_host_staged/epoch");
    trainer.train_epoch();
  }
  const audit::AuditReport report = tracer.snapshot();
  const auto violations = audit::check_contracts(
      report, {{.phase = "dqn_host_staged/epoch", .max_d2h_scalar = 2, .max_d2h_bulk = 0,
                .max_h2d = 0, .max_syncs = 2}});
  std::printf("%s", audit::format_violations(violations).c_str());
  bool bulk = false, h2d = false, syncs = false;
  for (const auto& v : violations) {
    bulk |= v.limit == "max_d2h_bulk";
    h2d |= v.limit == "max_h2d";
    syncs |= v.limit == "max_syncs";
  }
  EXPECT_TRUE(bulk) << "the per-step transition and TD-error downloads were not seen";
  EXPECT_TRUE(h2d) << "the per-step batch uploads were not seen";
  EXPECT_TRUE(syncs) << "the per-step synchronizations were not seen";
}

TEST(DqnTrainer, NonFiniteLossStopsTrainingNamingTheStep) {
  RESIDENT_REQUIRE_GPU();
  DqnConfig config = small_config(DqnEnvKind::CartPole, false);
  config.adamw.lr = 1e30;  // parameters overflow within a few steps
  config.max_grad_norm = 1e30;
  DqnTrainer trainer(config);
  std::string message;
  try {
    for (int e = 0; e < 10; ++e) trainer.train_epoch();
  } catch (const Error& e) {
    message = e.what();
  }
  std::printf("  %s\n", message.c_str());
  EXPECT_NE(message.find("non-finite loss or TD error"), std::string::npos) << message;
  EXPECT_NE(message.find("first at gradient step "), std::string::npos) << message;
}

class DqnCheckpoint : public ::testing::Test {
 protected:
  test::TempDir temp_{"dqn_checkpoint"};  // this test's own directory (ctest runs tests in parallel)
  const std::filesystem::path dir_ = temp_.path();
};

TEST_F(DqnCheckpoint, ResumeContinuesBitIdentically) {
  RESIDENT_REQUIRE_GPU();
  const DqnConfig config = small_config(DqnEnvKind::CartPole, true);
  // A: uninterrupted, with a checkpoint after epoch 2 (replay included).
  DqnTrainer a(config);
  a.train_epoch();
  a.train_epoch();
  a.save_checkpoint(dir_ / "a2.ckpt");
  a.save_checkpoint(dir_ / "a2_no_replay.ckpt", /*include_replay=*/false);
  std::vector<DqnEpochMetrics> a_tail = {a.train_epoch(), a.train_epoch()};
  EXPECT_LT(test::read_file_bytes(dir_ / "a2_no_replay.ckpt").size(),
            test::read_file_bytes(dir_ / "a2.ckpt").size());
  // B: the same run writes the same bytes (the checkpoint is deterministic).
  DqnTrainer b(config);
  b.train_epoch();
  b.train_epoch();
  b.save_checkpoint(dir_ / "b2.ckpt");
  EXPECT_EQ(test::read_file_bytes(dir_ / "a2.ckpt"), test::read_file_bytes(dir_ / "b2.ckpt"))
      << "two identical runs wrote different checkpoints";
  // C: a fresh trainer (as in a new process) one epoch in, so that its replay (one epoch of
  // transitions), envs, counters and networks all differ from A's at epoch 2, loads A's epoch-2
  // file and must continue exactly as A did: nothing of C's own state may leak through.
  DqnTrainer c(config);
  c.train_epoch();
  EXPECT_FALSE(snapshot(a) == snapshot(c));
  c.load_checkpoint(dir_ / "a2.ckpt");
  std::vector<DqnEpochMetrics> c_tail = {c.train_epoch(), c.train_epoch()};
  for (std::size_t i = 0; i < a_tail.size(); ++i)
    EXPECT_TRUE(same_bits(a_tail[i], c_tail[i])) << "epoch " << a_tail[i].epoch;
  EXPECT_TRUE(snapshot(a) == snapshot(c)) << "resumed run diverged";
}

TEST_F(DqnCheckpoint, CorruptOrMismatchedFileChangesNothing) {
  RESIDENT_REQUIRE_GPU();
  const DqnConfig config = small_config(DqnEnvKind::CartPole, false);
  DqnTrainer t(config);
  t.train_epoch();
  t.train_epoch();
  const auto good = dir_ / "good.ckpt";
  t.save_checkpoint(good);
  std::vector<std::byte> bytes = test::read_file_bytes(good);
  bytes[bytes.size() / 3] ^= std::byte{0x01};
  test::write_file_bytes(dir_ / "corrupt.ckpt", bytes);
  DqnConfig other = config;
  other.adamw.lr = 1e-3;
  DqnTrainer u(other);
  u.train_epoch();
  u.save_checkpoint(dir_ / "other.ckpt");

  t.train_epoch();
  const Snapshot before = snapshot(t);
  const std::uint64_t steps = t.gradient_steps();
  const std::pair<const char*, const char*> cases[] = {{"corrupt.ckpt", "corrupt checkpoint"},
                                                       {"other.ckpt", "checkpoint mismatch"},
                                                       {"missing.ckpt", "I/O error"}};
  for (const auto& [name, error_name] : cases) {
    std::string message, got;
    try {
      t.load_checkpoint(dir_ / name);
    } catch (const Error& e) {
      message = e.what();
      got = e.error_name();
    }
    std::printf("  %s: %s\n", name, message.c_str());
    EXPECT_FALSE(message.empty()) << name << " loaded";
    EXPECT_EQ(got, error_name) << message;
    EXPECT_NE(message.find(name), std::string::npos) << "the error does not name the file";
    EXPECT_TRUE(snapshot(t) == before) << name << " changed the trainer";
    EXPECT_EQ(t.gradient_steps(), steps);
  }
}

}  // namespace
