// The DQN checkpoint format on the host (no GPU): the trainer's sections round-trip exactly in
// one container beside the slabs, the env and the replay; a file is written atomically; another
// configuration, another trainer shape, another kind, a foreign, corrupted, truncated or newer
// file, a missing section or file each throw resident::Error with its name, naming the file (and
// the section where one is at fault).
#include "lib/rl/dqn/dqn_checkpoint.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "kernels/core/error.h"
#include "lib/nn/slab_checkpoint.h"
#include "lib/replay/gpu_replay_buffer.h"
#include "tests/support/file_bytes.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace resident;
using namespace resident::dqn;

constexpr std::uint64_t kHash = 0x5eed'0001'cafe'f00dull;

DqnTrainerState sample_state() {
  DqnTrainerState s;
  s.vector_steps = 1200;
  s.gradient_steps = 1888;
  s.epoch = 12;
  s.tracker_counters = {3, 1, 4, 1};
  s.train_counters = {5, 9};
  s.epoch_return_sum = 123.25;
  s.epoch_loss_sum = 0.0625;
  s.running_return = {1.5f, -2.0f, 0.0f};
  s.recent_returns = std::vector<float>(10, 7.0f);
  s.current_obs = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  return s;
}

DqnTrainerShape shape_of(const DqnTrainerState& s) {
  return {s.tracker_counters.size(), s.train_counters.size(), s.running_return.size(),
          s.recent_returns.size(), s.current_obs.size()};
}

nn::SlabLayout sample_layout() {
  nn::SlabLayout layout;
  layout.add("q.0.weight", {16, 6}, true);
  layout.add("q.0.bias", {16}, false);
  return layout;
}

nn::SlabState sample_slab(const nn::SlabLayout& layout, float base) {
  nn::SlabState s;
  s.step = static_cast<std::uint64_t>(base * 10);
  for (auto* part : {&s.params, &s.m, &s.v}) part->assign(layout.total_elements(), 0.0f);
  for (std::size_t i = 0; i < layout.total_elements(); ++i)
    s.params[i] = base + 0.001f * static_cast<float>(i);
  return s;
}

std::vector<std::byte> bytes_of(std::initializer_list<int> values) {
  std::vector<std::byte> out;
  for (const int v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

// A trainer's file as DqnTrainer::save_checkpoint lays it out (the replay optional).
void write_sample(const std::filesystem::path& path, std::uint64_t hash, bool with_replay,
                  const DqnTrainerState& state = sample_state()) {
  const nn::SlabLayout layout = sample_layout();
  CheckpointWriter out = dqn_checkpoint_writer(hash);
  out.add(kDqnTrainerSection, dqn_trainer_section(state));
  out.add(kDqnOnlineSlabSection, nn::slab_section(layout, sample_slab(layout, 1.0f)));
  out.add(kDqnTargetSlabSection, nn::slab_section(layout, sample_slab(layout, 2.0f)));
  out.add(kDqnEnvSection, bytes_of({1, 2, 3, 4, 5}));
  if (with_replay) out.add(kReplaySection, bytes_of({9, 8, 7}));
  out.write(path);
}

// The error's name and message, or "(no throw)".
std::pair<std::string, std::string> error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return {e.error_name(), e.what()};
  }
  return {"(no throw)", ""};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(DqnCheckpointFile, RoundTripsEverySectionAndLeavesNoTemporary) {
  const test::TempDir dir("dqn_checkpoint");
  const auto path = dir / "a.ckpt";
  write_sample(path, kHash, /*with_replay=*/true);
  write_sample(path, kHash, /*with_replay=*/true);  // replaces the first
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path()))
    ++files;
  EXPECT_EQ(files, 1u) << "a temporary file was left behind";

  const CheckpointFile file = read_dqn_checkpoint(path, kHash);
  EXPECT_EQ(file.kind(), kDqnCheckpointKind);
  const DqnTrainerState want = sample_state();
  const DqnTrainerState got = read_dqn_trainer_section(file, shape_of(want));
  EXPECT_EQ(got.vector_steps, want.vector_steps);
  EXPECT_EQ(got.gradient_steps, want.gradient_steps);
  EXPECT_EQ(got.epoch, want.epoch);
  EXPECT_EQ(got.tracker_counters, want.tracker_counters);
  EXPECT_EQ(got.train_counters, want.train_counters);
  EXPECT_EQ(got.epoch_return_sum, want.epoch_return_sum);
  EXPECT_EQ(got.epoch_loss_sum, want.epoch_loss_sum);
  EXPECT_TRUE(same_bits(got.running_return, want.running_return));
  EXPECT_TRUE(same_bits(got.recent_returns, want.recent_returns));
  EXPECT_TRUE(same_bits(got.current_obs, want.current_obs));
  const nn::SlabLayout layout = sample_layout();
  const nn::SlabState target = nn::read_slab_section(file, kDqnTargetSlabSection, layout);
  EXPECT_TRUE(same_bits(target.params, sample_slab(layout, 2.0f).params));
  const auto env = file.section(kDqnEnvSection);
  EXPECT_EQ(std::vector<std::byte>(env.begin(), env.end()), bytes_of({1, 2, 3, 4, 5}));
  EXPECT_TRUE(file.has(kReplaySection));

  write_sample(path, kHash, /*with_replay=*/false);
  EXPECT_FALSE(read_dqn_checkpoint(path, kHash).has(kReplaySection));
}

TEST(DqnCheckpointFile, AnotherConfigurationOrShapeIsAMismatchNamingBothValues) {
  const test::TempDir dir("dqn_checkpoint");
  const auto path = dir / "a.ckpt";
  write_sample(path, kHash, true);
  const auto [name, message] = error_of([&] { (void)read_dqn_checkpoint(path, kHash + 1); });
  std::printf("  %s\n", message.c_str());
  EXPECT_EQ(name, "checkpoint mismatch") << message;
  EXPECT_NE(message.find("a.ckpt\" section \"config\""), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(kHash) + " in the file, " + std::to_string(kHash + 1)),
            std::string::npos)
      << message;

  const CheckpointFile file = read_dqn_checkpoint(path, kHash);
  DqnTrainerShape more = shape_of(sample_state());
  more.train_counters += 1;
  const auto [name2, message2] = error_of([&] { (void)read_dqn_trainer_section(file, more); });
  std::printf("  %s\n", message2.c_str());
  EXPECT_EQ(name2, "checkpoint mismatch") << message2;
  EXPECT_NE(message2.find("section \"trainer\""), std::string::npos) << message2;
  EXPECT_NE(message2.find("train counters: 2 elements in the file, 3 expected"),
            std::string::npos)
      << message2;

  nn::SlabLayout other;
  other.add("q.0.weight", {16, 7}, true);
  const auto [name3, message3] =
      error_of([&] { (void)nn::read_slab_section(file, kDqnOnlineSlabSection, other); });
  EXPECT_EQ(name3, "checkpoint mismatch") << message3;
  EXPECT_NE(message3.find("section \"online-slab\""), std::string::npos) << message3;
}

TEST(DqnCheckpointFile, BadFilesThrowNamedErrors) {
  const test::TempDir dir("dqn_checkpoint");
  const auto good = dir / "good.ckpt";
  write_sample(good, kHash, true);
  const std::vector<std::byte> bytes = test::read_file_bytes(good);
  const auto expect = [&](const std::vector<std::byte>& content, const std::string& want) {
    const auto path = dir / "bad.ckpt";
    test::write_file_bytes(path, content);
    const auto [name, message] = error_of([&] { (void)read_dqn_checkpoint(path, kHash); });
    EXPECT_EQ(name, want) << message;
    EXPECT_NE(message.find("bad.ckpt"), std::string::npos) << "the file is not named: " << message;
  };
  for (const std::size_t at : {bytes.size() / 3, bytes.size() / 2, bytes.size() - 1}) {
    auto flipped = bytes;
    flipped[at] ^= std::byte{0x01};
    expect(flipped, "corrupt checkpoint");
  }
  expect(std::vector<std::byte>(bytes.begin(), bytes.end() - 8), "corrupt checkpoint");
  auto newer = bytes;
  newer[8] = std::byte{99};
  expect(newer, "unsupported checkpoint version");
  expect(bytes_of({'h', 'e', 'l', 'l', 'o'}), "not a checkpoint");

  CheckpointWriter ppo("ppo-trainer");
  ppo.add(kDqnConfigSection, SectionWriter().put<std::uint64_t>(kHash).take());
  ppo.write(dir / "ppo.ckpt");
  EXPECT_EQ(error_of([&] { (void)read_dqn_checkpoint(dir / "ppo.ckpt", kHash); }).first,
            "checkpoint kind mismatch");
  CheckpointWriter no_trainer = dqn_checkpoint_writer(kHash);
  no_trainer.write(dir / "no_trainer.ckpt");
  const CheckpointFile file = read_dqn_checkpoint(dir / "no_trainer.ckpt", kHash);
  EXPECT_EQ(error_of([&] { (void)read_dqn_trainer_section(file, {}); }).first, "missing section");
  EXPECT_EQ(error_of([&] { (void)read_dqn_checkpoint(dir / "missing.ckpt", kHash); }).first,
            "I/O error");
}

}  // namespace
