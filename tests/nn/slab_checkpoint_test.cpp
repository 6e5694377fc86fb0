// The slab's checkpoint section and file without a GPU: a round trip is exact, the write is
// atomic (no temporary left, an existing file replaced whole, a failed write leaves the old
// file), a slab is one section of any container under the name its owner gives it, and every
// kind of bad file throws resident::Error naming what is wrong: another layout (shape, name,
// decay flag, tensor count), a foreign file, another kind or version, a truncated or extended
// file, a flipped bit anywhere, a section whose fields no writer produces, a missing file.
#include "lib/nn/slab_checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"

namespace {

using namespace resident;
namespace fs = std::filesystem;

nn::SlabLayout make_layout() {
  nn::SlabLayout layout;
  layout.add("encoder.weight", {7, 5}, true);
  layout.add("encoder.bias", {7}, false);
  layout.add("head.weight", {3, 7}, true);
  layout.add("head.bias", {3}, false);
  return layout;
}

nn::SlabState make_state(const nn::SlabLayout& layout, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  nn::SlabState state;
  state.step = 1234567 + seed;
  for (auto* part : {&state.params, &state.m, &state.v}) {
    part->assign(layout.total_elements(), 0.0f);
    for (const nn::SlabTensor& t : layout.tensors())
      for (std::size_t i = 0; i < t.size; ++i) (*part)[t.offset + i] = value(rng);
  }
  return state;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<char> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class SlabCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("slab_checkpoint_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  fs::path write_bytes(const char* name, const std::vector<char>& bytes) const {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  // Reading `path` with `layout` throws an Error whose message holds `needle`.
  static void expect_rejected(const fs::path& path, const nn::SlabLayout& layout,
                              const std::string& needle) {
    try {
      (void)nn::read_slab_checkpoint(path, layout);
      ADD_FAILURE() << "reading " << path << " did not throw (wanted \"" << needle << "\")";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos)
          << "message lacks \"" << needle << "\": " << error.what();
      std::printf("  %s\n", error.what());
    }
  }

  fs::path dir_;
};

TEST_F(SlabCheckpoint, RoundTripIsExactAndLeavesNoTemporary) {
  const nn::SlabLayout layout = make_layout();
  const nn::SlabState state = make_state(layout, 1);
  const fs::path path = dir_ / "a.ckpt";
  nn::write_slab_checkpoint(path, layout, state);
  const nn::SlabState back = nn::read_slab_checkpoint(path, layout);
  EXPECT_EQ(back.step, state.step);
  EXPECT_TRUE(same_bits(back.params, state.params));
  EXPECT_TRUE(same_bits(back.m, state.m));
  EXPECT_TRUE(same_bits(back.v, state.v));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
  const CheckpointFile file = CheckpointFile::read(path, "");
  EXPECT_EQ(file.kind(), nn::kSlabCheckpointKind);
  EXPECT_EQ(file.section_names(), std::vector<std::string>{nn::kSlabSection});
}

// A trainer's file holds its slabs as sections under its own names, beside its other sections.
TEST_F(SlabCheckpoint, ASlabIsOneSectionOfAnyContainer) {
  const nn::SlabLayout layout = make_layout();
  nn::SlabLayout small;
  small.add("w", {2, 3}, true);
  const nn::SlabState online = make_state(layout, 1), target = make_state(small, 2);
  const fs::path path = dir_ / "trainer.ckpt";
  CheckpointWriter out("some-trainer");
  out.add("online-slab", nn::slab_section(layout, online));
  out.add("counters", SectionWriter().put<std::uint64_t>(7).take());
  out.add("target-slab", nn::slab_section(small, target));
  out.write(path);
  const CheckpointFile file = CheckpointFile::read(path, "some-trainer");
  const nn::SlabState a = nn::read_slab_section(file, "online-slab", layout);
  const nn::SlabState b = nn::read_slab_section(file, "target-slab", small);
  EXPECT_EQ(a.step, online.step);
  EXPECT_TRUE(same_bits(a.params, online.params) && same_bits(a.v, online.v));
  EXPECT_EQ(b.step, target.step);
  EXPECT_TRUE(same_bits(b.m, target.m));
  // The other slab's layout, under the same section name: named with the file and the section.
  try {
    (void)nn::read_slab_section(file, "target-slab", layout);
    ADD_FAILURE() << "a slab of another layout was read";
  } catch (const Error& error) {
    EXPECT_EQ(error.error_name(), "checkpoint mismatch") << error.what();
    EXPECT_NE(std::string(error.what()).find("trainer.ckpt\" section \"target-slab\""),
              std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("\"w\" in the file, \"encoder.weight\" in the slab"),
              std::string::npos)
        << error.what();
  }
  try {
    (void)nn::read_slab_section(file, "slab", layout);
    ADD_FAILURE() << "a missing section was read";
  } catch (const Error& error) {
    EXPECT_EQ(error.error_name(), "missing section") << error.what();
  }
}

TEST_F(SlabCheckpoint, ASecondWriteReplacesTheFileWhole) {
  const nn::SlabLayout layout = make_layout();
  const fs::path path = dir_ / "a.ckpt";
  nn::write_slab_checkpoint(path, layout, make_state(layout, 1));
  const nn::SlabState second = make_state(layout, 2);
  nn::write_slab_checkpoint(path, layout, second);
  const nn::SlabState back = nn::read_slab_checkpoint(path, layout);
  EXPECT_EQ(back.step, second.step);
  EXPECT_TRUE(same_bits(back.params, second.params));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(SlabCheckpoint, AFailedWriteLeavesTheOldFile) {
  const nn::SlabLayout layout = make_layout();
  const fs::path path = dir_ / "a.ckpt";
  const nn::SlabState first = make_state(layout, 1);
  nn::write_slab_checkpoint(path, layout, first);
  nn::SlabState wrong = make_state(layout, 2);
  wrong.v.pop_back();
  EXPECT_THROW(nn::write_slab_checkpoint(path, layout, wrong), Error);
  // A directory where the file should go cannot be written either.
  EXPECT_THROW(nn::write_slab_checkpoint(dir_ / "missing_dir" / "b.ckpt", layout, first), Error);
  EXPECT_EQ(nn::read_slab_checkpoint(path, layout).step, first.step);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(SlabCheckpoint, AnotherLayoutIsRejectedNamingTheDifference) {
  const nn::SlabLayout layout = make_layout();
  const fs::path path = dir_ / "a.ckpt";
  nn::write_slab_checkpoint(path, layout, make_state(layout, 1));

  nn::SlabLayout shape, name, decay, fewer, more;
  shape.add("encoder.weight", {5, 7}, true);
  name.add("encoder.weight", {7, 5}, true);
  name.add("encoder.b", {7}, false);
  decay.add("encoder.weight", {7, 5}, false);
  for (const nn::SlabTensor& t : layout.tensors()) {
    if (&t != &layout.tensors().back()) fewer.add(t.name, t.shape, t.decay);
    more.add(t.name, t.shape, t.decay);
  }
  more.add("extra", {2}, false);
  expect_rejected(path, shape,
                  "\"encoder.weight\" has shape [7, 5] in the file, [5, 7] in the slab");
  expect_rejected(path, name, "\"encoder.bias\" in the file, \"encoder.b\" in the slab");
  expect_rejected(path, decay, "weight decay on in the file, off in the slab");
  expect_rejected(path, fewer, "first extra: \"head.bias\" [3] in the file");
  expect_rejected(path, more, "first extra: \"extra\" [2] in the slab");
}

TEST_F(SlabCheckpoint, BadFilesAreRejectedNamingWhatIsWrong) {
  const nn::SlabLayout layout = make_layout();
  const fs::path good = dir_ / "good.ckpt";
  nn::write_slab_checkpoint(good, layout, make_state(layout, 1));
  const std::vector<char> bytes = read_bytes(good);

  std::vector<char> foreign = bytes;
  foreign[1] = 'Z';
  expect_rejected(write_bytes("foreign", foreign), layout, "not a checkpoint");

  std::vector<char> version = bytes;
  version[8] = 2;  // the container version's low byte
  expect_rejected(write_bytes("version", version), layout,
                  "version 2, this build reads version 1");

  expect_rejected(write_bytes("tiny", std::vector<char>(bytes.begin(), bytes.begin() + 20)), layout,
                  "truncated");
  expect_rejected(write_bytes("short", std::vector<char>(bytes.begin(), bytes.end() - 1)), layout,
                  "truncated");
  std::vector<char> longer = bytes;
  longer.insert(longer.end(), 8, '\0');
  expect_rejected(write_bytes("long", longer), layout, "trailing bytes");

  std::vector<char> payload = bytes;
  payload[bytes.size() / 2] ^= 0x40;  // inside the slabs
  expect_rejected(write_bytes("payload", payload), layout, "checksum mismatch");

  // Another kind of checkpoint (an intact file) is not a slab.
  CheckpointWriter other("dqn-trainer");
  other.add(nn::kSlabSection, nn::slab_section(layout, make_state(layout, 1)));
  other.write(dir_ / "other_kind");
  expect_rejected(dir_ / "other_kind", layout,
                  "the file is a \"dqn-trainer\" checkpoint, expected \"param-slab\"");

  expect_rejected(dir_ / "missing.ckpt", layout, "I/O error");
  expect_rejected(dir_, layout, "I/O error");  // a directory
}

// Intact files (the checksum holds) whose slab section holds fields no writer produces: each is
// rejected naming the section and the field, before anything is allocated for a claimed size.
TEST_F(SlabCheckpoint, MalformedSectionsAreRejectedNamingTheField) {
  const nn::SlabLayout layout = make_layout();
  const auto file_with = [&](const char* name, std::vector<std::byte> section) {
    CheckpointWriter out(nn::kSlabCheckpointKind);
    out.add(nn::kSlabSection, std::move(section));
    const fs::path path = dir_ / name;
    out.write(path);
    return path;
  };
  const std::vector<std::uint64_t> extents = {7, 5};
  const std::vector<std::uint64_t> no_extents;
  expect_rejected(file_with("huge_count", SectionWriter().put<std::uint64_t>(1ull << 60).take()),
                  layout, "tensors in");
  expect_rejected(file_with("decay", SectionWriter()
                                         .put<std::uint64_t>(1)
                                         .put_string("encoder.weight")
                                         .put<std::uint8_t>(2)
                                         .put_array<std::uint64_t>(extents)
                                         .take()),
                  layout, "has decay flag 2");
  expect_rejected(file_with("rank", SectionWriter()
                                        .put<std::uint64_t>(1)
                                        .put_string("encoder.weight")
                                        .put<std::uint8_t>(1)
                                        .put_array<std::uint64_t>(no_extents)
                                        .take()),
                  layout, "has rank 0");
  std::vector<std::byte> cut = nn::slab_section(layout, make_state(layout, 1));
  cut.resize(cut.size() - 4);
  expect_rejected(file_with("cut", cut), layout, "section \"slab\"");
  std::vector<std::byte> extra = nn::slab_section(layout, make_state(layout, 1));
  extra.resize(extra.size() + 8, std::byte{0});
  expect_rejected(file_with("extra", extra), layout, "bytes left over");
  // The right layout followed by params of a wrong length.
  SectionWriter wrong;
  wrong.put<std::uint64_t>(layout.tensors().size());
  for (const nn::SlabTensor& t : layout.tensors()) {
    const std::vector<std::uint64_t> shape(t.shape.begin(), t.shape.end());
    wrong.put_string(t.name).put<std::uint8_t>(t.decay ? 1 : 0).put_array<std::uint64_t>(shape);
  }
  const std::vector<float> short_params(layout.total_elements() - 1, 0.5f);
  wrong.put<std::uint64_t>(3).put_array<float>(short_params);
  expect_rejected(file_with("short_params", wrong.take()), layout, "params has");
}

// Every single flipped bit, at a spread of positions over the whole file (header, each slab, the
// checksum itself), makes the read throw.
TEST_F(SlabCheckpoint, EveryFlippedBitIsDetected) {
  const nn::SlabLayout layout = make_layout();
  const fs::path good = dir_ / "good.ckpt";
  nn::write_slab_checkpoint(good, layout, make_state(layout, 1));
  const std::vector<char> bytes = read_bytes(good);
  std::size_t checked = 0;
  for (std::size_t at = 0; at < bytes.size(); at += (at < 200 ? 1 : 37)) {
    for (const int bit : {0, 3, 7}) {
      std::vector<char> flipped = bytes;
      flipped[at] = static_cast<char>(flipped[at] ^ (1 << bit));
      const fs::path path = write_bytes("flipped", flipped);
      EXPECT_THROW((void)nn::read_slab_checkpoint(path, layout), Error)
          << "byte " << at << " bit " << bit;
      ++checked;
    }
  }
  std::printf("  %zu single-bit corruptions of a %zu-byte file, all rejected\n", checked,
              bytes.size());
}

}  // namespace
