// The one checkpoint container of the library: a file of named sections (name + bytes) with a
// kind, one checksum over the whole file, written atomically, and read back only after every
// byte has been validated. Owners (trainers, replay buffers, slabs) put their state into
// sections with SectionWriter and read it with SectionReader; the container knows nothing of
// what a section means.
//
//   CheckpointWriter out("supervised-trainer");
//   out.add("counters", SectionWriter().put<std::uint64_t>(epoch).put(best_loss).take());
//   out.write(path);                                      // temp file, fsync, rename
//
//   const CheckpointFile in = CheckpointFile::read(path, "supervised-trainer");
//   SectionReader r = in.reader("counters");
//   const auto epoch = r.get<std::uint64_t>("epoch");  r.finish();
//
// File layout (little-endian; every part padded with zero bytes to a multiple of 8):
//   8        magic "RSDCKPT\0"
//   4        format version (kCheckpointFormatVersion)
//   4        section count S (<= kCheckpointMaxSections)
//   8        file size in bytes, the checksum included
//   8 + K    kind length K (<= kCheckpointMaxNameBytes), the kind's bytes, padding
//   S times  8 + N name length N (1 .. kCheckpointMaxNameBytes), the name's bytes, padding;
//            8 + P payload length P, the payload, padding
//   8        checksum of every byte before it (64-bit multiply-xorshift over 8-byte words: any
//            change confined to one word changes it)
//
// Writing: a temporary file beside the target ("<name>.tmp.<pid>"), fsync, rename over the
// target, fsync of the directory; on any failure the temporary file is removed and the target is
// untouched (a reader sees the old file or the new one, never a torn one). Reading: the whole
// file, then magic, version, exact size, checksum, structure (lengths, padding, unique names) and
// the kind, before anything is returned. Errors are resident::Error with call()
// "read_checkpoint(<path>)" or "write_checkpoint(<path>)" and error_name() one of "I/O error",
// "not a checkpoint", "unsupported checkpoint version", "corrupt checkpoint" (truncated, trailing
// bytes, malformed, checksum mismatch), "checkpoint kind mismatch", "missing section",
// "invalid argument"; a SectionReader throws "corrupt checkpoint" naming the section and field,
// or "checkpoint mismatch" when an intact file holds state of another shape than the reader's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace resident {

inline constexpr std::uint32_t kCheckpointFormatVersion = 1;
inline constexpr std::size_t kCheckpointMaxNameBytes = 256;
inline constexpr std::size_t kCheckpointMaxSections = 65536;

// The bytes of one section: values appended in order, little-endian as in memory.
class SectionWriter {
 public:
  template <class T>
  SectionWriter& put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>, "put() writes trivially copyable values");
    append(&value, sizeof(T));
    return *this;
  }
  // u64 byte count, then the bytes.
  SectionWriter& put_string(std::string_view text) {
    put<std::uint64_t>(text.size());
    append(text.data(), text.size());
    return *this;
  }
  // u64 element count, then the elements.
  template <class T>
  SectionWriter& put_array(std::span<const T> values) {
    static_assert(std::is_trivially_copyable_v<T>, "put_array() writes trivially copyable values");
    put<std::uint64_t>(values.size());
    append(values.data(), values.size_bytes());
    return *this;
  }
  std::vector<std::byte> take() { return std::move(bytes_); }

 private:
  void append(const void* data, std::size_t n) {
    const auto* p = static_cast<const std::byte*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }
  std::vector<std::byte> bytes_;
};

// Reads what a SectionWriter wrote, in the same order. `where` names the section in errors
// ("<path> section \"counters\"").
class SectionReader {
 public:
  SectionReader(std::span<const std::byte> bytes, std::string where)
      : bytes_(bytes), where_(std::move(where)) {}

  template <class T>
  T get(const char* field) {
    static_assert(std::is_trivially_copyable_v<T>, "get() reads trivially copyable values");
    T value;
    take(&value, sizeof(T), field);
    return value;
  }
  std::string get_string(const char* field);
  // The next array; when `expected_count` is not kAnyCount, a different count throws naming both.
  static constexpr std::size_t kAnyCount = static_cast<std::size_t>(-1);
  template <class T>
  std::vector<T> get_array(const char* field, std::size_t expected_count = kAnyCount) {
    static_assert(std::is_trivially_copyable_v<T>, "get_array() reads trivially copyable values");
    const std::size_t count = array_count(field, sizeof(T), expected_count);
    std::vector<T> values(count);
    take(values.data(), count * sizeof(T), field);
    return values;
  }
  // The next array, which must hold `expected_count` elements: another count is state of another
  // shape in an intact file, and throws "checkpoint mismatch" naming the field and both counts.
  template <class T>
  std::vector<T> get_array_matching(const char* field, std::size_t expected_count,
                                    std::source_location at = std::source_location::current()) {
    static_assert(std::is_trivially_copyable_v<T>, "get_array() reads trivially copyable values");
    const std::size_t count = array_count(field, sizeof(T), kAnyCount);
    if (count != expected_count)
      mismatch(std::string(field) + ": " + std::to_string(count) + " elements in the file, " +
                   std::to_string(expected_count) + " expected",
               at);
    std::vector<T> values(count);
    take(values.data(), count * sizeof(T), field);
    return values;
  }
  // Throws when bytes are left over (call it after the last field).
  void finish() const;
  std::size_t remaining() const noexcept { return bytes_.size() - offset_; }
  // "<path> section \"<name>\"", for an owner's own errors about this section.
  const std::string& where() const noexcept { return where_; }

  // Errors of an owner that checks what it read: "corrupt checkpoint" (values no writer
  // produces) or "checkpoint mismatch" (state of another shape or configuration), each with the
  // call "SectionReader(<where()>)" and the caller's file and line.
  [[noreturn]] void corrupt(const std::string& detail,
                            std::source_location at = std::source_location::current()) const;
  [[noreturn]] void mismatch(const std::string& detail,
                             std::source_location at = std::source_location::current()) const;

 private:
  void take(void* out, std::size_t n, const char* field);
  std::size_t array_count(const char* field, std::size_t element_bytes, std::size_t expected);

  std::span<const std::byte> bytes_;
  std::string where_;
  std::size_t offset_ = 0;
};

class CheckpointWriter {
 public:
  // `kind` names what wrote the file ("supervised-trainer"); 1 .. kCheckpointMaxNameBytes bytes.
  explicit CheckpointWriter(std::string kind);
  // Throws "invalid argument" for an empty or too long name, a name already added, or more than
  // kCheckpointMaxSections sections.
  CheckpointWriter& add(std::string name, std::vector<std::byte> bytes);
  // The whole file in memory (what write() puts on disk).
  std::vector<std::byte> serialize() const;
  // Atomic write (see the top of this file). Throws "I/O error" naming the failed operation.
  void write(const std::filesystem::path& path) const;

 private:
  std::string kind_;
  std::vector<std::pair<std::string, std::vector<std::byte>>> sections_;
};

class CheckpointFile {
 public:
  // Reads and validates `path`; `expected_kind` empty accepts any kind.
  static CheckpointFile read(const std::filesystem::path& path, std::string_view expected_kind);
  // The same validation of bytes in memory (`path` only names them in errors).
  static CheckpointFile parse(std::vector<std::byte> bytes, const std::filesystem::path& path,
                              std::string_view expected_kind);

  const std::string& kind() const noexcept { return kind_; }
  const std::filesystem::path& path() const noexcept { return path_; }
  std::vector<std::string> section_names() const;
  bool has(std::string_view name) const noexcept;
  // Throws "missing section" naming the sections the file has.
  std::span<const std::byte> section(std::string_view name) const;
  SectionReader reader(std::string_view name) const;

 private:
  struct Entry {
    std::string name;
    std::size_t offset;  // into bytes_
    std::size_t size;
  };
  std::filesystem::path path_;
  std::string kind_;
  std::vector<std::byte> bytes_;
  std::vector<Entry> entries_;
};

}  // namespace resident
