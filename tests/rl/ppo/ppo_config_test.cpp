// PpoConfig validation (every bad value names the field, the value and the allowed range), its
// AdamW configuration (CleanRL's lr annealing as the slab's device schedule), the config hash,
// and the checkpoint file format on the host: round trip, atomic replacement, and clear errors
// for a foreign, truncated, corrupted, other-version or other-config file.
#include "lib/rl/ppo/ppo_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "lib/rl/ppo/ppo_checkpoint.h"

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

class PpoCheckpointFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ppo_checkpoint_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    data_.config_hash = 0x1234;
    data_.updates_done = 7;
    data_.device_counters = {896, 895, 112};
    data_.host_rng = "1 2 3";
    data_.slab_file = std::vector<std::byte>(37, std::byte{5});
    data_.env_state = std::vector<std::byte>(100, std::byte{9});
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  PpoCheckpointData data_;
};

TEST_F(PpoCheckpointFile, RoundTripsAndReplacesAtomically) {
  const auto path = dir_ / "a.ckpt";
  write_ppo_checkpoint(path, data_);
  data_.updates_done = 8;
  write_ppo_checkpoint(path, data_);  // replaces
  const PpoCheckpointData got = read_ppo_checkpoint(path, 0x1234);
  EXPECT_EQ(got.updates_done, 8u);
  EXPECT_EQ(got.device_counters, data_.device_counters);
  EXPECT_EQ(got.host_rng, data_.host_rng);
  EXPECT_EQ(got.slab_file, data_.slab_file);
  EXPECT_EQ(got.env_state, data_.env_state);
  for (const auto& entry : std::filesystem::directory_iterator(dir_))
    EXPECT_EQ(entry.path().filename(), "a.ckpt") << "a temporary file was left behind";
}

TEST_F(PpoCheckpointFile, BadFilesThrowNamedErrors) {
  const auto path = dir_ / "b.ckpt";
  write_ppo_checkpoint(path, data_);
  std::vector<std::byte> bytes = read_file_bytes(path);
  auto expect_error = [&](const std::vector<std::byte>& content, const std::string& name,
                          std::uint64_t hash = 0x1234) {
    const auto p = dir_ / "bad.ckpt";
    write_file_atomically(p, content);
    try {
      (void)read_ppo_checkpoint(p, hash);
      ADD_FAILURE() << "accepted; expected " << name;
    } catch (const Error& e) {
      EXPECT_EQ(e.error_name(), name) << e.what();
    }
  };
  expect_error(bytes, "checkpoint mismatch", 0x9999);
  auto flipped = bytes;
  flipped[60] ^= std::byte{1};
  expect_error(flipped, "corrupt checkpoint");
  expect_error(std::vector<std::byte>(bytes.begin(), bytes.end() - 8), "corrupt checkpoint");
  auto foreign = bytes;
  foreign[0] = std::byte{'X'};
  expect_error(foreign, "not a PPO checkpoint");
  auto version = bytes;
  version[8] = std::byte{2};
  expect_error(version, "unsupported checkpoint version");
  EXPECT_THROW((void)read_ppo_checkpoint(dir_ / "missing.ckpt", 0x1234), Error);
}

}  // namespace
