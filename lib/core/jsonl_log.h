// JsonRecord and JsonlLog: a training run's log as JSON lines, one object per line, each line
// flushed to the operating system as it is written, so a run that is killed keeps every record
// it wrote before. Host-only; no CUDA.
//
// Values: strings (escaped per RFC 8259; bytes >= 0x80 pass through, so UTF-8 stays UTF-8),
// integers, booleans, doubles (the shortest text that reads back to the same double; NaN and
// infinities, which JSON cannot hold, are written as null), nested records and arrays of
// doubles or of records. Keys keep the order they were added in; a key added twice throws,
// since JSON readers differ on duplicates.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace resident {

class JsonRecord {
 public:
  JsonRecord& add(std::string_view key, std::string_view value);
  JsonRecord& add(std::string_view key, const char* value) {
    return add(key, std::string_view(value));
  }
  JsonRecord& add(std::string_view key, double value);
  JsonRecord& add(std::string_view key, std::int64_t value);
  JsonRecord& add(std::string_view key, std::uint64_t value);
  template <class T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool> &&
             !std::is_same_v<T, std::int64_t> && !std::is_same_v<T, std::uint64_t>)
  JsonRecord& add(std::string_view key, T value) {
    if constexpr (std::is_signed_v<T>) return add(key, static_cast<std::int64_t>(value));
    else return add(key, static_cast<std::uint64_t>(value));
  }
  JsonRecord& add(std::string_view key, bool value);
  JsonRecord& add(std::string_view key, const JsonRecord& value);
  // Arrays: of doubles (each written as a single double is) and of records.
  JsonRecord& add(std::string_view key, std::span<const double> values);
  JsonRecord& add(std::string_view key, std::span<const JsonRecord> values);

  // The record as one line of JSON, without the newline.
  std::string text() const { return "{" + body_ + "}"; }

 private:
  void key(std::string_view key);
  std::string body_;
  std::string keys_;  // "\n"-separated keys added so far, for the duplicate check
};

// `text` as a JSON string literal, quotes included.
std::string json_string(std::string_view text);

class JsonlLog {
 public:
  enum class Mode { Truncate, Append };
  // Opens `path` (its folder must exist). Throws resident::Error naming the path and the
  // system's reason when it cannot be opened.
  explicit JsonlLog(const std::filesystem::path& path, Mode mode = Mode::Truncate);
  ~JsonlLog();
  JsonlLog(const JsonlLog&) = delete;
  JsonlLog& operator=(const JsonlLog&) = delete;

  // Writes the record and a newline and flushes them; throws resident::Error naming the path
  // when the write or the flush fails (a full disk, say).
  void write(const JsonRecord& record);
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

}  // namespace resident
