#include "lib/core/checkpoint_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <fstream>
#include <system_error>

#include "kernels/core/error.h"

namespace resident {

static_assert(std::endian::native == std::endian::little,
              "checkpoints are written in the host's byte order, which must be little-endian");

namespace {

constexpr std::array<char, 8> kMagic = {'R', 'S', 'D', 'C', 'K', 'P', 'T', '\0'};
constexpr std::size_t kFixedHeaderBytes = 8 + 4 + 4 + 8;

constexpr std::size_t padded(std::size_t n) { return (n + 7) / 8 * 8; }

std::string quoted(const std::filesystem::path& path) { return "\"" + path.string() + "\""; }

// 64-bit multiply-xorshift over 8-byte words (`bytes` a multiple of 8 long). For a fixed rest of
// the file each step is a bijection of the running value, so a change confined to one word
// always changes the result.
std::uint64_t checksum(std::span<const std::byte> bytes) {
  std::uint64_t hash = 0x52534443'4B505431ull;
  for (std::size_t i = 0; i + 8 <= bytes.size(); i += 8) {
    std::uint64_t word;
    std::memcpy(&word, bytes.data() + i, 8);
    hash ^= word;
    hash *= 0x9E3779B97F4A7C15ull;
    hash ^= hash >> 32;
  }
  return hash;
}

template <class T>
void append(std::vector<std::byte>& out, const T& value) {
  const auto* p = reinterpret_cast<const std::byte*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

void append_padded(std::vector<std::byte>& out, const void* data, std::size_t n) {
  append<std::uint64_t>(out, n);
  const auto* p = static_cast<const std::byte*>(data);
  out.insert(out.end(), p, p + n);
  out.resize(padded(out.size()), std::byte{0});
}

std::string errno_text(int code) { return std::system_category().message(code); }

// The temporary file of an atomic write; removed on destruction unless committed.
class TempFile {
 public:
  TempFile(std::filesystem::path path, std::string call) : path_(std::move(path)), call_(call) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("open of " + quoted(path_), errno);
  }
  ~TempFile() {
    if (fd_ >= 0) (void)::close(fd_);
    if (!committed_) (void)::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
      const ssize_t written = ::write(fd_, bytes.data(), bytes.size());
      if (written < 0) {
        if (errno == EINTR) continue;
        fail("write of " + quoted(path_), errno);
      }
      bytes = bytes.subspan(static_cast<std::size_t>(written));
    }
  }

  void commit(const std::filesystem::path& target) {
    if (::fsync(fd_) != 0) fail("fsync of " + quoted(path_), errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("close of " + quoted(path_), errno);
    if (::rename(path_.c_str(), target.c_str()) != 0)
      fail("rename of " + quoted(path_) + " to " + quoted(target), errno);
    committed_ = true;
    std::filesystem::path directory = target.parent_path();
    if (directory.empty()) directory = ".";
    const int dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {  // best effort: the rename is durable once the directory is synced
      (void)::fsync(dir_fd);
      (void)::close(dir_fd);
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what, int code) const {
    throw Error(call_, "I/O error", what + ": " + errno_text(code), __FILE__, __LINE__);
  }

  std::filesystem::path path_;
  std::string call_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// SectionReader

std::string SectionReader::get_string(const char* field) {
  const std::size_t n = array_count(field, 1, kAnyCount);
  std::string text(n, '\0');
  take(text.data(), n, field);
  return text;
}

void SectionReader::finish() const {
  if (offset_ != bytes_.size())
    corrupt(std::to_string(bytes_.size() - offset_) + " bytes left over after the last field");
}

void SectionReader::take(void* out, std::size_t n, const char* field) {
  if (bytes_.size() - offset_ < n)
    corrupt(std::string("truncated at ") + field + ": " + std::to_string(n) + " bytes needed, " +
                std::to_string(bytes_.size() - offset_) + " left");
  if (n != 0) std::memcpy(out, bytes_.data() + offset_, n);
  offset_ += n;
}

std::size_t SectionReader::array_count(const char* field, std::size_t element_bytes,
                                       std::size_t expected) {
  const auto count = get<std::uint64_t>(field);
  if (count > (bytes_.size() - offset_) / element_bytes)
    corrupt(std::string(field) + " claims " + std::to_string(count) + " elements of " +
                std::to_string(element_bytes) + " bytes, " +
                std::to_string(bytes_.size() - offset_) + " bytes left");
  if (expected != kAnyCount && count != expected)
    corrupt(std::string(field) + " has " + std::to_string(count) + " elements, expected " +
                std::to_string(expected));
  return static_cast<std::size_t>(count);
}

void SectionReader::corrupt(const std::string& detail, std::source_location at) const {
  throw Error("SectionReader(" + where_ + ")", "corrupt checkpoint", detail, at.file_name(),
              static_cast<int>(at.line()));
}

void SectionReader::mismatch(const std::string& detail, std::source_location at) const {
  throw Error("SectionReader(" + where_ + ")", "checkpoint mismatch", detail, at.file_name(),
              static_cast<int>(at.line()));
}

// ---------------------------------------------------------------------------------------------
// CheckpointWriter

CheckpointWriter::CheckpointWriter(std::string kind) : kind_(std::move(kind)) {
  if (kind_.empty() || kind_.size() > kCheckpointMaxNameBytes)
    throw Error("CheckpointWriter", "invalid argument",
                "kind \"" + kind_ + "\" has " + std::to_string(kind_.size()) +
                    " bytes, allowed 1 .. " + std::to_string(kCheckpointMaxNameBytes),
                __FILE__, __LINE__);
}

CheckpointWriter& CheckpointWriter::add(std::string name, std::vector<std::byte> bytes) {
  if (name.empty() || name.size() > kCheckpointMaxNameBytes)
    throw Error("CheckpointWriter::add", "invalid argument",
                "section name \"" + name + "\" has " + std::to_string(name.size()) +
                    " bytes, allowed 1 .. " + std::to_string(kCheckpointMaxNameBytes),
                __FILE__, __LINE__);
  for (const auto& section : sections_)
    if (section.first == name)
      throw Error("CheckpointWriter::add", "invalid argument",
                  "section \"" + name + "\" added twice", __FILE__, __LINE__);
  if (sections_.size() >= kCheckpointMaxSections)
    throw Error("CheckpointWriter::add", "invalid argument",
                "more than " + std::to_string(kCheckpointMaxSections) + " sections", __FILE__,
                __LINE__);
  sections_.emplace_back(std::move(name), std::move(bytes));
  return *this;
}

std::vector<std::byte> CheckpointWriter::serialize() const {
  std::vector<std::byte> out;
  out.insert(out.end(), reinterpret_cast<const std::byte*>(kMagic.data()),
             reinterpret_cast<const std::byte*>(kMagic.data()) + kMagic.size());
  append<std::uint32_t>(out, kCheckpointFormatVersion);
  append<std::uint32_t>(out, static_cast<std::uint32_t>(sections_.size()));
  const std::size_t size_offset = out.size();
  append<std::uint64_t>(out, 0);  // the file size, filled in below
  append_padded(out, kind_.data(), kind_.size());
  for (const auto& [name, bytes] : sections_) {
    append_padded(out, name.data(), name.size());
    append_padded(out, bytes.data(), bytes.size());
  }
  const std::uint64_t total = out.size() + 8;
  std::memcpy(out.data() + size_offset, &total, 8);
  append<std::uint64_t>(out, checksum(out));
  return out;
}

void CheckpointWriter::write(const std::filesystem::path& path) const {
  const std::string call = "write_checkpoint(" + quoted(path) + ")";
  const std::vector<std::byte> bytes = serialize();
  std::filesystem::path temp = path;
  temp += ".tmp." + std::to_string(::getpid());
  TempFile file(temp, call);
  file.write(bytes);
  file.commit(path);
}

// ---------------------------------------------------------------------------------------------
// CheckpointFile

CheckpointFile CheckpointFile::read(const std::filesystem::path& path,
                                    std::string_view expected_kind) {
  const std::string call = "read_checkpoint(" + quoted(path) + ")";
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    throw Error(call, "I/O error", "is a directory", __FILE__, __LINE__);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(call, "I/O error", "cannot open for reading", __FILE__, __LINE__);
  std::vector<char> text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(call, "I/O error", "read failed", __FILE__, __LINE__);
  std::vector<std::byte> bytes(text.size());
  if (!text.empty()) std::memcpy(bytes.data(), text.data(), text.size());
  return parse(std::move(bytes), path, expected_kind);
}

CheckpointFile CheckpointFile::parse(std::vector<std::byte> bytes,
                                     const std::filesystem::path& path,
                                     std::string_view expected_kind) {
  const std::string call = "read_checkpoint(" + quoted(path) + ")";
  const auto corrupt = [&](const std::string& detail, int line) {
    throw Error(call, "corrupt checkpoint", detail, __FILE__, line);
  };
  const std::size_t size = bytes.size();
  if (size < kMagic.size() ||
      std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0)
    throw Error(call, "not a checkpoint",
                size < kMagic.size() ? "the file has " + std::to_string(size) +
                                           " bytes, shorter than the 8-byte magic"
                                     : "the first 8 bytes are not the magic \"RSDCKPT\"",
                __FILE__, __LINE__);
  if (size < kFixedHeaderBytes + 8)
    corrupt("truncated: " + std::to_string(size) + " bytes, the header alone needs " +
                std::to_string(kFixedHeaderBytes + 8),
            __LINE__);
  std::uint32_t version = 0, count = 0;
  std::uint64_t recorded = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&count, bytes.data() + 12, 4);
  std::memcpy(&recorded, bytes.data() + 16, 8);
  if (version != kCheckpointFormatVersion)
    throw Error(call, "unsupported checkpoint version",
                "version " + std::to_string(version) + ", this build reads version " +
                    std::to_string(kCheckpointFormatVersion),
                __FILE__, __LINE__);
  if (recorded != size)
    corrupt(std::string(recorded > size ? "truncated" : "trailing bytes") + ": the file has " +
                std::to_string(size) + " bytes, its header says " + std::to_string(recorded),
            __LINE__);
  if (size % 8 != 0) corrupt("size " + std::to_string(size) + " is not a multiple of 8", __LINE__);
  std::uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + size - 8, 8);
  const std::uint64_t computed = checksum(std::span<const std::byte>(bytes).first(size - 8));
  if (stored != computed) corrupt("checksum mismatch: the file's bytes were changed", __LINE__);
  if (count > kCheckpointMaxSections)
    corrupt(std::to_string(count) + " sections, at most " +
                std::to_string(kCheckpointMaxSections),
            __LINE__);

  // Structure: length-prefixed, zero-padded parts that end exactly at the checksum.
  const std::size_t end = size - 8;
  std::size_t offset = kFixedHeaderBytes;
  const auto part = [&](const char* what, std::size_t max_bytes) {
    if (end - offset < 8)
      corrupt(std::string("malformed: ") + what + "'s length at offset " + std::to_string(offset) +
                  " runs past the end",
              __LINE__);
    std::uint64_t n = 0;
    std::memcpy(&n, bytes.data() + offset, 8);
    offset += 8;
    if (n > max_bytes || n > end - offset || padded(n) > end - offset)
      corrupt(std::string("malformed: ") + what + " of " + std::to_string(n) + " bytes at offset " +
                  std::to_string(offset) + " (" + std::to_string(end - offset) +
                  " bytes left, limit " + std::to_string(max_bytes) + ")",
              __LINE__);
    const std::size_t first = offset;
    for (std::size_t i = first + n; i < first + padded(n); ++i)
      if (bytes[i] != std::byte{0})
        corrupt(std::string("malformed: nonzero padding after ") + what, __LINE__);
    offset += padded(n);
    return std::pair<std::size_t, std::size_t>{first, static_cast<std::size_t>(n)};
  };
  const auto as_text = [&](std::pair<std::size_t, std::size_t> range) {
    return std::string(reinterpret_cast<const char*>(bytes.data()) + range.first, range.second);
  };

  CheckpointFile file;
  file.path_ = path;
  file.kind_ = as_text(part("the kind", kCheckpointMaxNameBytes));
  for (std::uint32_t s = 0; s < count; ++s) {
    const std::string name = as_text(part("a section name", kCheckpointMaxNameBytes));
    if (name.empty()) corrupt("malformed: section " + std::to_string(s) + " has no name", __LINE__);
    if (file.has(name)) corrupt("malformed: section \"" + name + "\" appears twice", __LINE__);
    const auto payload = part(("section \"" + name + "\"").c_str(), end);
    file.entries_.push_back({name, payload.first, payload.second});
  }
  if (offset != end)
    corrupt("malformed: " + std::to_string(end - offset) + " bytes after the last section",
            __LINE__);
  if (!expected_kind.empty() && file.kind_ != expected_kind)
    throw Error(call, "checkpoint kind mismatch",
                "the file is a \"" + file.kind_ + "\" checkpoint, expected \"" +
                    std::string(expected_kind) + "\"",
                __FILE__, __LINE__);
  file.bytes_ = std::move(bytes);
  return file;
}

std::vector<std::string> CheckpointFile::section_names() const {
  std::vector<std::string> names;
  for (const Entry& e : entries_) names.push_back(e.name);
  return names;
}

bool CheckpointFile::has(std::string_view name) const noexcept {
  for (const Entry& e : entries_)
    if (e.name == name) return true;
  return false;
}

std::span<const std::byte> CheckpointFile::section(std::string_view name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return std::span<const std::byte>(bytes_).subspan(e.offset, e.size);
  std::string present;
  for (const Entry& e : entries_) present += (present.empty() ? "" : ", ") + e.name;
  throw Error("read_checkpoint(" + quoted(path_) + ")", "missing section",
              "no section \"" + std::string(name) + "\" in a \"" + kind_ +
                  "\" checkpoint; sections: " + (present.empty() ? "none" : present),
              __FILE__, __LINE__);
}

SectionReader CheckpointFile::reader(std::string_view name) const {
  return SectionReader(section(name), quoted(path_) + " section \"" + std::string(name) + "\"");
}

}  // namespace resident
