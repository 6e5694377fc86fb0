// The slab checkpoint format without a GPU: a round trip is exact, the write is atomic (no
// temporary left, an existing file replaced whole, a failed write leaves the old file), and every
// kind of bad file throws resident::Error naming what is wrong: another layout (shape, name, decay
// flag, tensor count), a foreign file, another version, a truncated or extended file, a flipped
// bit anywhere (header or payload), a missing file.
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
  // Header (32 fixed bytes + tensors, padded to 8) + 3 slabs + checksum.
  std::size_t header = 32;
  for (const nn::SlabTensor& t : layout.tensors())
    header += 4 + t.name.size() + 1 + 4 + 8 * t.shape.size();
  header = (header + 7) / 8 * 8;
  EXPECT_EQ(fs::file_size(path), header + 3 * 4 * layout.total_elements() + 8);
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
  expect_rejected(write_bytes("foreign", foreign), layout, "not a slab checkpoint");

  std::vector<char> version = bytes;
  version[8] = 2;  // the version's low byte
  expect_rejected(write_bytes("version", version), layout,
                  "file has version 2, this build reads 1");

  expect_rejected(write_bytes("tiny", std::vector<char>(bytes.begin(), bytes.begin() + 20)), layout,
                  "truncated");
  expect_rejected(write_bytes("short", std::vector<char>(bytes.begin(), bytes.end() - 1)), layout,
                  "truncated");
  std::vector<char> longer = bytes;
  longer.insert(longer.end(), 8, '\0');
  expect_rejected(write_bytes("long", longer), layout, "trailing bytes");

  std::vector<char> total = bytes;
  total[16] ^= 0x40;  // the total element count
  expect_rejected(write_bytes("total", total), layout, "corrupt checkpoint");

  std::vector<char> huge = bytes;
  huge[23] = 0x7f;  // an enormous total: rejected before anything is allocated for it
  expect_rejected(write_bytes("huge", huge), layout, "corrupt checkpoint");

  expect_rejected(dir_ / "missing.ckpt", layout, "I/O error");
  expect_rejected(dir_, layout, "I/O error");  // a directory
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
