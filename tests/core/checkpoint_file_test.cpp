// The checkpoint container (CPU, runs in CI): round trip of named sections; every truncation and
// every single-byte change of a file is rejected with a named error; version, kind, missing
// sections and section fields are named; a write that fails (file-size limit mid-write, a
// missing directory, a directory in the way) leaves the old file byte for byte and no
// temporary file behind.
#include "lib/core/checkpoint_file.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace resident;

std::vector<std::byte> bytes_of(const std::string& text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

CheckpointWriter sample_writer() {
  CheckpointWriter w("test-kind");
  const std::vector<float> weights = {1.5f, -2.0f, 3.25f};
  w.add("counters", SectionWriter()
                        .put<std::uint64_t>(42)
                        .put<double>(0.125)
                        .put_string("mamba2")
                        .put_array<float>(weights)
                        .take());
  w.add("empty", {});
  w.add("odd", bytes_of("abcde"));  // 5 bytes: padded to 8 in the file
  return w;
}

std::vector<std::byte> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(text.size());
  if (!text.empty()) std::memcpy(out.data(), text.data(), text.size());
  return out;
}

void write_bytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// The error's name and text, or "(no throw)".
std::pair<std::string, std::string> error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return {e.error_name(), e.what()};
  }
  return {"(no throw)", ""};
}

std::size_t files_in(const std::filesystem::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

TEST(CheckpointFile, RoundTripsNamedSections) {
  const test::TempDir dir("checkpoint_file");
  const auto path = dir / "a.ckpt";
  sample_writer().write(path);
  EXPECT_EQ(files_in(dir.path()), 1u) << "a temporary file was left behind";
  EXPECT_EQ(std::filesystem::file_size(path) % 8, 0u);
  const CheckpointFile file = CheckpointFile::read(path, "test-kind");
  EXPECT_EQ(file.kind(), "test-kind");
  EXPECT_EQ(file.section_names(), (std::vector<std::string>{"counters", "empty", "odd"}));
  EXPECT_TRUE(file.section("empty").empty());
  ASSERT_EQ(file.section("odd").size(), 5u);
  EXPECT_EQ(std::memcmp(file.section("odd").data(), "abcde", 5), 0);
  SectionReader r = file.reader("counters");
  EXPECT_EQ(r.get<std::uint64_t>("step"), 42u);
  EXPECT_EQ(r.get<double>("loss"), 0.125);
  EXPECT_EQ(r.get_string("model"), "mamba2");
  EXPECT_EQ(r.get_array<float>("weights", 3), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  r.finish();
  // Any kind is accepted with an empty expected kind; the bytes equal serialize().
  EXPECT_EQ(CheckpointFile::read(path, "").kind(), "test-kind");
  EXPECT_EQ(read_bytes(path), sample_writer().serialize());
  // Overwriting replaces the file.
  CheckpointWriter other("test-kind");
  other.add("only", bytes_of("x"));
  other.write(path);
  EXPECT_EQ(CheckpointFile::read(path, "test-kind").section_names(),
            (std::vector<std::string>{"only"}));
}

TEST(CheckpointFile, EveryTruncationIsRejected) {
  const std::vector<std::byte> full = sample_writer().serialize();
  for (std::size_t n = 0; n < full.size(); ++n) {
    const std::vector<std::byte> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    const auto [name, what] =
        error_of([&] { CheckpointFile::parse(cut, "cut.ckpt", "test-kind"); });
    if (n < 8) {
      ASSERT_EQ(name, "not a checkpoint") << n << " bytes: " << what;
    } else {
      ASSERT_EQ(name, "corrupt checkpoint") << n << " bytes: " << what;
      ASSERT_NE(what.find("truncated"), std::string::npos) << what;
    }
  }
  std::vector<std::byte> longer = full;
  longer.resize(full.size() + 8, std::byte{0});
  const auto [name, what] = error_of([&] { CheckpointFile::parse(longer, "x", "test-kind"); });
  EXPECT_EQ(name, "corrupt checkpoint");
  EXPECT_NE(what.find("trailing bytes: the file has " + std::to_string(longer.size()) +
                      " bytes, its header says " + std::to_string(full.size())),
            std::string::npos)
      << what;
}

TEST(CheckpointFile, EverySingleByteChangeIsRejected) {
  const std::vector<std::byte> full = sample_writer().serialize();
  std::size_t checksum_errors = 0;
  for (std::size_t i = 0; i < full.size(); ++i)
    for (const unsigned flip : {0x01u, 0x80u, 0xFFu}) {
      std::vector<std::byte> bad = full;
      bad[i] ^= std::byte{static_cast<unsigned char>(flip)};
      const auto [name, what] = error_of([&] { CheckpointFile::parse(bad, "x", "test-kind"); });
      ASSERT_NE(name, "(no throw)") << "byte " << i << " ^ " << flip << " was accepted";
      checksum_errors += what.find("checksum mismatch") != std::string::npos;
    }
  EXPECT_GT(checksum_errors, 0u);
}

TEST(CheckpointFile, VersionKindAndSectionsAreNamed) {
  std::vector<std::byte> bytes = sample_writer().serialize();
  auto [name, what] = error_of([&] { CheckpointFile::parse(bytes, "f.ckpt", "other-kind"); });
  EXPECT_EQ(name, "checkpoint kind mismatch");
  EXPECT_NE(what.find("a \"test-kind\" checkpoint, expected \"other-kind\""), std::string::npos);
  const test::TempDir dir("checkpoint_file");
  std::vector<std::byte> future = bytes;
  future[8] = std::byte{2};  // version 2
  write_bytes(dir / "future.ckpt", future);
  std::tie(name, what) = error_of([&] { CheckpointFile::read(dir / "future.ckpt", ""); });
  EXPECT_EQ(name, "unsupported checkpoint version");
  EXPECT_NE(what.find("version 2, this build reads version 1"), std::string::npos);
  std::tie(name, what) =
      error_of([&] { CheckpointFile::parse(bytes_of("hello, world, text"), "t", ""); });
  EXPECT_EQ(name, "not a checkpoint");
  const CheckpointFile file = CheckpointFile::parse(bytes, "f.ckpt", "test-kind");
  std::tie(name, what) = error_of([&] { file.section("slab"); });
  EXPECT_EQ(name, "missing section");
  EXPECT_NE(what.find("no section \"slab\" in a \"test-kind\" checkpoint; sections: counters, "
                      "empty, odd"),
            std::string::npos)
      << what;
  // Section fields: truncation, a wrong array count, bytes left over.
  std::tie(name, what) = error_of([&] {
    SectionReader r = file.reader("odd");
    r.get<std::uint64_t>("step");
  });
  EXPECT_EQ(name, "corrupt checkpoint");
  EXPECT_NE(what.find("section \"odd\""), std::string::npos);
  EXPECT_NE(what.find("truncated at step: 8 bytes needed, 5 left"), std::string::npos) << what;
  std::tie(name, what) = error_of([&] {
    SectionReader r = file.reader("counters");
    r.get<std::uint64_t>("step");
    r.get<double>("loss");
    r.get_string("model");
    r.get_array<float>("weights", 4);
  });
  EXPECT_NE(what.find("weights has 3 elements, expected 4"), std::string::npos) << what;
  std::tie(name, what) = error_of([&] {
    SectionReader r = file.reader("counters");
    r.get<std::uint64_t>("step");
    r.finish();
  });
  EXPECT_NE(what.find("bytes left over after the last field"), std::string::npos) << what;
}

TEST(CheckpointWriter, InvalidSectionsAreNamed) {
  CheckpointWriter w("kind");
  w.add("a", {});
  EXPECT_EQ(error_of([&] { w.add("a", {}); }).first, "invalid argument");
  EXPECT_NE(error_of([&] { w.add("a", {}); }).second.find("section \"a\" added twice"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { w.add("", {}); }).first, "invalid argument");
  EXPECT_EQ(error_of([&] { w.add(std::string(257, 'n'), {}); }).first, "invalid argument");
  EXPECT_EQ(error_of([] { CheckpointWriter(""); }).first, "invalid argument");
}

// A write that fails part-way (the process's file-size limit is below the new file's size, so
// write() fails with EFBIG) leaves the old file byte for byte, and no temporary file.
TEST(CheckpointWriter, AFailedWriteLeavesTheOldFile) {
  const test::TempDir dir("checkpoint_file");
  const auto path = dir / "state.ckpt";
  sample_writer().write(path);
  const std::vector<std::byte> old = read_bytes(path);

  CheckpointWriter big("test-kind");
  big.add("payload", std::vector<std::byte>(1 << 20, std::byte{7}));
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit small = saved;
  small.rlim_cur = 64 * 1024;
  const auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const auto [name, what] = error_of([&] { big.write(path); });
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previous_handler);
  EXPECT_EQ(name, "I/O error");
  EXPECT_NE(what.find("write of"), std::string::npos) << what;
  EXPECT_EQ(read_bytes(path), old) << "the old file changed";
  EXPECT_EQ(files_in(dir.path()), 1u) << "a temporary file was left behind";
  EXPECT_EQ(CheckpointFile::read(path, "test-kind").section_names().size(), 3u);

  // A directory where the file should go: the rename fails, nothing is left.
  const auto blocked = dir / "blocked";
  std::filesystem::create_directory(blocked);
  std::filesystem::create_directory(blocked / "inside");  // a non-empty directory
  const auto [rename_name, rename_what] = error_of([&] { sample_writer().write(blocked); });
  EXPECT_EQ(rename_name, "I/O error");
  EXPECT_NE(rename_what.find("rename of"), std::string::npos) << rename_what;
  EXPECT_EQ(files_in(dir.path()), 2u);
  // A missing directory: the temporary file cannot be created.
  const auto [open_name, open_what] =
      error_of([&] { sample_writer().write(dir / "no/such.ckpt"); });
  EXPECT_EQ(open_name, "I/O error");
  EXPECT_NE(open_what.find("open of"), std::string::npos) << open_what;
  // Reading a missing file or a directory.
  EXPECT_EQ(error_of([&] { CheckpointFile::read(dir / "absent", ""); }).first, "I/O error");
  EXPECT_EQ(error_of([&] { CheckpointFile::read(blocked, ""); }).first, "I/O error");
}

}  // namespace
