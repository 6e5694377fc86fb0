// PpoConfig validation (every bad value names the field, the value and the allowed range), its
// AdamW configuration (CleanRL's lr annealing as the slab's device schedule) and the config hash
// (the checkpoint format is tested in ppo_checkpoint_test.cpp).
#include "lib/rl/ppo/ppo_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kernels/core/error.h"

namespace {

using namespace resident;
using namespace resident::ppo;

void expect_rejected(const std::function<void(PpoConfig&)>& change, const std::string& field,
                     const std::string& value) {
  PpoConfig c;
  change(c);
  try {
    validate(c);
    ADD_FAILURE() << field << " = " << value << " was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(field + " = " + value), std::string::npos) << what;
    EXPECT_NE(what.find("allowed"), std::string::npos) << what;
  }
}

TEST(PpoConfig, DefaultsAreValid) { EXPECT_NO_THROW(validate(PpoConfig{})); }

// CleanRL's annealing (lr of update u = learning_rate * (1 - u / total_updates), one lr for the
// update's K * M minibatch steps) as the slab's LinearToZero schedule; constant without anneal_lr.
TEST(PpoConfig, AdamWConfigAnnealsOncePerUpdateLikeCleanRl) {
  PpoConfig c;
  c.epochs = 3;
  c.minibatches = 4;
  c.total_updates = 10;
  c.learning_rate = 2.5e-4;
  c.weight_decay = 0.01;
  const nn::AdamWConfig a = adamw_config(c);
  EXPECT_EQ(a.lr, c.learning_rate);
  EXPECT_EQ(a.beta1, c.adam_beta1);
  EXPECT_EQ(a.beta2, c.adam_beta2);
  EXPECT_EQ(a.eps, c.adam_eps);
  EXPECT_EQ(a.weight_decay, c.weight_decay);
  EXPECT_EQ(a.schedule, nn::LrSchedule::LinearToZero);
  EXPECT_EQ(a.steps_per_group, 12u);
  EXPECT_EQ(a.total_groups, 10u);
  const std::uint64_t per_update = c.epochs * c.minibatches;
  for (std::uint64_t u = 0; u < 12; ++u)
    for (std::uint64_t k = 0; k < per_update; ++k) {
      const double frac = 1.0 - static_cast<double>(u) / static_cast<double>(c.total_updates);
      const double want = u < c.total_updates ? c.learning_rate * frac : 0.0;
      EXPECT_EQ(nn::scheduled_lr(a, u * per_update + k + 1), want) << "update " << u << ", step " << k;
    }
  c.anneal_lr = false;
  const nn::AdamWConfig constant = adamw_config(c);
  EXPECT_EQ(constant.schedule, nn::LrSchedule::Constant);
  EXPECT_EQ(nn::scheduled_lr(constant, 1000), c.learning_rate);
}

TEST(PpoConfig, EveryBadValueNamesFieldValueAndRange) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  expect_rejected([](PpoConfig& c) { c.env_count = 0; }, "env_count", "0");
  expect_rejected([](PpoConfig& c) { c.rollout_steps = 0; }, "rollout_steps", "0");
  expect_rejected([](PpoConfig& c) { c.epochs = 0; }, "epochs", "0");
  expect_rejected([](PpoConfig& c) { c.minibatches = 0; }, "minibatches", "0");
  expect_rejected([](PpoConfig& c) { c.minibatches = 3; }, "minibatches", "3");  // 512 % 3
  expect_rejected([](PpoConfig& c) { c.minibatches = 1024; }, "minibatches", "1024");
  expect_rejected([](PpoConfig& c) { c.hidden = {}; }, "hidden.size()", "0");
  expect_rejected([](PpoConfig& c) { c.hidden = {64, 0}; }, "hidden width", "0");
  expect_rejected([&](PpoConfig& c) { c.learning_rate = nan; }, "learning_rate", "nan");
  expect_rejected([](PpoConfig& c) { c.learning_rate = 0; }, "learning_rate", "0");
  expect_rejected([](PpoConfig& c) { c.total_updates = 0; }, "total_updates", "0");
  expect_rejected([](PpoConfig& c) { c.gamma = 1.5; }, "gamma", "1.5");
  expect_rejected([](PpoConfig& c) { c.gae_lambda = -0.1; }, "gae_lambda", "-0.10000000000000001");
  expect_rejected([](PpoConfig& c) { c.clip_coef = 0; }, "clip_coef", "0");
  expect_rejected([](PpoConfig& c) { c.entropy_coef = -1; }, "entropy_coef", "-1");
  expect_rejected([](PpoConfig& c) { c.value_coef = -1; }, "value_coef", "-1");
  expect_rejected([](PpoConfig& c) { c.max_grad_norm = 0; }, "max_grad_norm", "0");
  expect_rejected([](PpoConfig& c) { c.adam_beta1 = 1; }, "adam_beta1", "1");
  expect_rejected([](PpoConfig& c) { c.adam_beta2 = 1; }, "adam_beta2", "1");
  expect_rejected([](PpoConfig& c) { c.adam_eps = 0; }, "adam_eps", "0");
  expect_rejected([](PpoConfig& c) { c.weight_decay = -1; }, "weight_decay", "-1");
  expect_rejected([](PpoConfig& c) { c.advantage_epsilon = 0; }, "advantage_epsilon", "0");
  expect_rejected([](PpoConfig& c) { c.env_count = 1u << 20; c.rollout_steps = 1u << 12; },
                  "env_count * rollout_steps", "4294967296");
  PpoConfig inf;
  inf.max_grad_norm = std::numeric_limits<double>::infinity();
  EXPECT_NO_THROW(validate(inf));
}

TEST(PpoConfig, HashSeesTrainingFieldsNotGraphs) {
  PpoConfig a, b;
  b.use_graphs = false;
  EXPECT_EQ(config_hash(a), config_hash(b));
  b.seed = 2;
  EXPECT_NE(config_hash(a), config_hash(b));
  PpoConfig c;
  c.hidden = {64, 65};
  EXPECT_NE(config_hash(a), config_hash(c));
}

}  // namespace
