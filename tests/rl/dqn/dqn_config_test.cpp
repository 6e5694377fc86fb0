// CPU tests of the DQN trainer's config: validation (every bad field named with its value and
// allowed range) and the hash (the checkpoint format is tested in dqn_checkpoint_test.cpp).
#include "lib/rl/dqn/dqn_config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/core/error.h"

namespace {

using namespace resident;
using namespace resident::dqn;

std::string validation_message(const DqnConfig& config) {
  try {
    validate(config);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DqnConfig, DefaultsAreValid) {
  EXPECT_NO_THROW(validate(DqnConfig{}));
  DqnConfig trading;
  trading.env = DqnEnvKind::Trading;
  EXPECT_NO_THROW(validate(trading));
}

TEST(DqnConfig, EveryBadFieldIsNamedWithValueAndRange) {
  DqnConfig c;
  c.env_count = 0;
  c.gamma = 1.5;
  c.batch = 512;
  c.replay_capacity = 100;
  c.learning_starts = 10;
  c.adamw.lr = -1.0;
  c.tau = 0.0;
  c.target_update_period = 0;
  c.epsilon.end = 2.0;
  c.hidden = {64, 0};
  const std::string m = validation_message(c);
  std::printf("  %s\n", m.c_str());
  for (const char* part : {"env_count = 0, allowed [1, 65536]", "gamma = 1.5, allowed [0, 1]",
                           "replay_capacity = 100, allowed [batch, 2^30]",
                           "learning_starts = 10, allowed [batch, replay_capacity]",
                           "adamw.lr = -1, allowed finite, > 0", "tau = 0, allowed (0, 1]",
                           "target_update_period = 0, allowed >= 1", "epsilon.end = 2, allowed [0, 1]",
                           "hidden[i] = 0, allowed [1, 65536]"})
    EXPECT_NE(m.find(part), std::string::npos) << "missing: " << part;
}

TEST(DqnConfig, StepsPerGraphOutsideItsRangeIsNamed) {
  for (const std::size_t bad : {std::size_t{0}, kMaxStepsPerGraph + 1}) {
    DqnConfig c;
    c.steps_per_graph = bad;
    const std::string m = validation_message(c);
    const std::string expected = "steps_per_graph = " + std::to_string(bad) + ", allowed [1, 64]";
    EXPECT_NE(m.find(expected), std::string::npos) << m;
  }
  for (const std::size_t good : {std::size_t{1}, kDefaultStepsPerGraph, kMaxStepsPerGraph}) {
    DqnConfig c;
    c.steps_per_graph = good;
    EXPECT_NO_THROW(validate(c)) << good;
  }
}

TEST(DqnConfig, TradingFieldsAreChecked) {
  DqnConfig c;
  c.env = DqnEnvKind::Trading;
  c.trading.market.steps = 50;
  c.trading.window = 9;
  c.trading.episode_length = 100;
  const std::string m = validation_message(c);
  EXPECT_NE(m.find("trading.market.steps = 50"), std::string::npos) << m;
}

TEST(DqnConfig, HashFollowsTrainingFieldsButNotTheSchedulingSwitches) {
  DqnConfig a, b;
  EXPECT_EQ(config_hash(a), config_hash(b));
  b.use_graph = false;
  EXPECT_EQ(config_hash(a), config_hash(b));
  b.steps_per_graph = 1;  // the same kernels in the same order, fewer per graph launch
  EXPECT_EQ(config_hash(a), config_hash(b));
  b.overlap_side_work = false;  // every buffer sees the same operations in the same order
  EXPECT_EQ(config_hash(a), config_hash(b));
  b.adamw.lr = 1e-3;
  EXPECT_NE(config_hash(a), config_hash(b));
  // The fused kernels round differently from the GEMM path: a checkpoint records which ran.
  DqnConfig gemm_acting;
  gemm_acting.fused_acting = false;
  EXPECT_NE(config_hash(a), config_hash(gemm_acting));
  DqnConfig gemm_step;
  gemm_step.fused_train_step = false;
  EXPECT_NE(config_hash(a), config_hash(gemm_step));
  EXPECT_NE(config_hash(gemm_acting), config_hash(gemm_step));
}

}  // namespace
