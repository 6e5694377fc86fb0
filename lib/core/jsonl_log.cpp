#include "lib/core/jsonl_log.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>

#include "kernels/core/error.h"

namespace resident {

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (byte < 0x20 || byte == 0x7f) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", byte);
          out += escaped;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

void JsonRecord::key(std::string_view key) {
  const std::string marked = "\n" + std::string(key) + "\n";
  if (("\n" + keys_).find(marked) != std::string::npos)
    throw Error("JsonRecord::add", "duplicate key", "\"" + std::string(key) + "\" added twice",
                __FILE__, __LINE__);
  keys_ += std::string(key) + "\n";
  if (!body_.empty()) body_ += ",";
  body_ += json_string(key) + ":";
}

JsonRecord& JsonRecord::add(std::string_view k, std::string_view value) {
  key(k);
  body_ += json_string(value);
  return *this;
}

namespace {

void append_number(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  out.append(text, result.ptr);
}

}  // namespace

JsonRecord& JsonRecord::add(std::string_view k, double value) {
  key(k);
  append_number(body_, value);
  return *this;
}

namespace {

// "[a,b,...]" with each element appended by `append`.
template <class T, class Append>
void append_array(std::string& out, std::span<const T> values, Append append) {
  out += "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ",";
    append(out, values[i]);
  }
  out += "]";
}

}  // namespace

JsonRecord& JsonRecord::add(std::string_view k, std::span<const double> values) {
  key(k);
  append_array(body_, values, append_number);
  return *this;
}

JsonRecord& JsonRecord::add(std::string_view k, std::span<const JsonRecord> values) {
  key(k);
  append_array(body_, values, [](std::string& out, const JsonRecord& r) { out += r.text(); });
  return *this;
}

JsonRecord& JsonRecord::add(std::string_view k, std::int64_t value) {
  key(k);
  body_ += std::to_string(value);
  return *this;
}

JsonRecord& JsonRecord::add(std::string_view k, std::uint64_t value) {
  key(k);
  body_ += std::to_string(value);
  return *this;
}

JsonRecord& JsonRecord::add(std::string_view k, bool value) {
  key(k);
  body_ += value ? "true" : "false";
  return *this;
}

JsonRecord& JsonRecord::add(std::string_view k, const JsonRecord& value) {
  key(k);
  body_ += value.text();
  return *this;
}

JsonlLog::JsonlLog(const std::filesystem::path& path, Mode mode) : path_(path) {
  file_ = std::fopen(path.c_str(), mode == Mode::Append ? "a" : "w");
  if (file_ == nullptr)
    throw Error("JsonlLog", "cannot open file", path.string() + ": " + std::strerror(errno),
                __FILE__, __LINE__);
}

JsonlLog::~JsonlLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void JsonlLog::write(const JsonRecord& record) {
  const std::string line = record.text() + "\n";
  errno = 0;
  const bool ok = std::fwrite(line.data(), 1, line.size(), file_) == line.size() &&
                  std::fflush(file_) == 0;
  if (!ok)
    throw Error("JsonlLog::write", "cannot write file",
                path_.string() + ": " + (errno != 0 ? std::strerror(errno) : "short write"),
                __FILE__, __LINE__);
}

}  // namespace resident
