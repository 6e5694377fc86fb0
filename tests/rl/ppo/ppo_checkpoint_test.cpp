// The PPO checkpoint format on the host (no GPU): the trainer's section round-trips exactly in one
// container beside the slab and the env; a file is replaced atomically; another configuration or
// another number of device counters is a mismatch naming both values; a foreign, corrupted,
// truncated, newer or other-kind file, a missing section or file each throw resident::Error with
// its name.
#include "lib/rl/ppo/ppo_checkpoint.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/core/error.h"
#include "lib/nn/slab_checkpoint.h"
#include "tests/support/file_bytes.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace resident;
using namespace resident::ppo;

constexpr std::uint64_t kHash = 0x1234;

PpoTrainerState sample_state(std::uint64_t updates = 7) {
  return {updates, {896, 895, 112}, "1 2 3"};
}

nn::SlabLayout sample_layout() {
  nn::SlabLayout layout;
  layout.add("actor.0.weight", {8, 4}, true);
  layout.add("critic.0.weight", {8, 4}, true);
  return layout;
}

void write_sample(const std::filesystem::path& path, const PpoTrainerState& state) {
  const nn::SlabLayout layout = sample_layout();
  nn::SlabState slab;
  slab.step = state.updates_done;
  slab.params.assign(layout.total_elements(), 0.25f);
  slab.m.assign(layout.total_elements(), 0.0f);
  slab.v.assign(layout.total_elements(), 0.0f);
  CheckpointWriter out = ppo_checkpoint_writer(kHash);
  out.add(kPpoTrainerSection, ppo_trainer_section(state));
  out.add(kPpoSlabSection, nn::slab_section(layout, slab));
  out.add(kPpoEnvSection, std::vector<std::byte>(100, std::byte{9}));
  out.write(path);
}

std::pair<std::string, std::string> error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return {e.error_name(), e.what()};
  }
  return {"(no throw)", ""};
}

TEST(PpoCheckpointFile, RoundTripsAndReplacesAtomically) {
  const test::TempDir dir("ppo_checkpoint");
  const auto path = dir / "a.ckpt";
  write_sample(path, sample_state(7));
  write_sample(path, sample_state(8));  // replaces
  const CheckpointFile file = read_ppo_checkpoint(path, kHash);
  const PpoTrainerState got = read_ppo_trainer_section(file, 3);
  EXPECT_EQ(got.updates_done, 8u);
  EXPECT_EQ(got.device_counters, sample_state().device_counters);
  EXPECT_EQ(got.host_rng, "1 2 3");
  EXPECT_EQ(nn::read_slab_section(file, kPpoSlabSection, sample_layout()).step, 8u);
  EXPECT_EQ(file.section(kPpoEnvSection).size(), 100u);
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename(), "a.ckpt") << "a temporary file was left behind";
}

TEST(PpoCheckpointFile, BadFilesThrowNamedErrors) {
  const test::TempDir dir("ppo_checkpoint");
  const auto good = dir / "b.ckpt";
  write_sample(good, sample_state());
  const std::vector<std::byte> bytes = test::read_file_bytes(good);
  const auto expect = [&](const std::vector<std::byte>& content, const std::string& want,
                          std::uint64_t hash = kHash) {
    const auto path = dir / "bad.ckpt";
    test::write_file_bytes(path, content);
    const auto [name, message] = error_of([&] { (void)read_ppo_checkpoint(path, hash); });
    std::printf("  %s\n", message.c_str());
    EXPECT_EQ(name, want) << message;
    EXPECT_NE(message.find("bad.ckpt"), std::string::npos) << "the file is not named: " << message;
  };
  expect(bytes, "checkpoint mismatch", 0x9999);
  auto flipped = bytes;
  flipped[60] ^= std::byte{1};
  expect(flipped, "corrupt checkpoint");
  flipped = bytes;
  flipped[bytes.size() / 2] ^= std::byte{0x10};
  expect(flipped, "corrupt checkpoint");
  expect(std::vector<std::byte>(bytes.begin(), bytes.end() - 8), "corrupt checkpoint");
  auto foreign = bytes;
  foreign[0] = std::byte{'X'};
  expect(foreign, "not a checkpoint");
  auto version = bytes;
  version[8] = std::byte{2};
  expect(version, "unsupported checkpoint version");
  CheckpointWriter dqn("dqn-trainer");
  dqn.add(kPpoConfigSection, SectionWriter().put<std::uint64_t>(kHash).take());
  test::write_file_bytes(dir / "bad.ckpt", dqn.serialize());
  EXPECT_EQ(error_of([&] { (void)read_ppo_checkpoint(dir / "bad.ckpt", kHash); }).first,
            "checkpoint kind mismatch");
  EXPECT_EQ(error_of([&] { (void)read_ppo_checkpoint(dir / "missing.ckpt", kHash); }).first,
            "I/O error");

  // An intact file of a trainer with another number of device counters.
  const CheckpointFile file = read_ppo_checkpoint(good, kHash);
  const auto [name, message] = error_of([&] { (void)read_ppo_trainer_section(file, 4); });
  std::printf("  %s\n", message.c_str());
  EXPECT_EQ(name, "checkpoint mismatch") << message;
  EXPECT_NE(message.find("section \"trainer\""), std::string::npos) << message;
  EXPECT_NE(message.find("device counters: 3 elements in the file, 4 expected"), std::string::npos)
      << message;
  ppo_checkpoint_writer(kHash).write(dir / "empty.ckpt");
  const CheckpointFile empty = read_ppo_checkpoint(dir / "empty.ckpt", kHash);
  EXPECT_EQ(error_of([&] { (void)read_ppo_trainer_section(empty, 3); }).first, "missing section");
}

}  // namespace
