#include "audit/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace resident::audit {

namespace {
[[noreturn]] void type_error(const char* expected) {
  throw std::runtime_error(std::string("JSON value is not ") + expected);
}

void escape_to(std::string& out, const std::string& s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Json parse_document() {
    Json value = parse_value();
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw std::runtime_error("line " + std::to_string(line) + ", column " +
                             std::to_string(column) + ": " + what);
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }
  bool consume_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }

  Json parse_value() {
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end of input");
    const char c = text_[pos_];
    if (c == '{') return parse_object();
    if (c == '[') return parse_array();
    if (c == '"') return Json(parse_string());
    if (consume_word("true")) return Json(true);
    if (consume_word("false")) return Json(false);
    if (consume_word("null")) return Json();
    if (c == '-' || (c >= '0' && c <= '9')) return Json(parse_number());
    fail(std::string("unexpected character '") + c + "'");
  }

  Json parse_object() {
    expect('{');
    Json::Object object;
    if (consume('}')) return Json(std::move(object));
    do {
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a string key");
      std::string key = parse_string();
      expect(':');
      object[std::move(key)] = parse_value();
    } while (consume(','));
    expect('}');
    return Json(std::move(object));
  }

  Json parse_array() {
    expect('[');
    Json::Array array;
    if (consume(']')) return Json(std::move(array));
    do {
      array.push_back(parse_value());
    } while (consume(','));
    expect(']');
    return Json(std::move(array));
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (pos_ + 4 > text_.size()) fail("short \\u escape");
          const unsigned code =
              static_cast<unsigned>(std::strtoul(std::string(text_.substr(pos_, 4)).c_str(), nullptr, 16));
          pos_ += 4;
          if (code < 0x80) {
            out += static_cast<char>(code);
          } else if (code < 0x800) {
            out += static_cast<char>(0xC0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
          }
          break;
        }
        default: fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  double parse_number() {
    const std::size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const std::size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ > from;
    };
    if (!digits()) fail("expected digits");
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (!digits()) fail("expected digits after '.'");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (!digits()) fail("expected exponent digits");
    }
    return std::strtod(std::string(text_.substr(start, pos_ - start)).c_str(), nullptr);
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};
}  // namespace

bool Json::as_bool() const {
  if (!is_bool()) type_error("a boolean");
  return std::get<bool>(value_);
}
double Json::as_number() const {
  if (!is_number()) type_error("a number");
  return std::get<double>(value_);
}
const std::string& Json::as_string() const {
  if (!is_string()) type_error("a string");
  return std::get<std::string>(value_);
}
const Json::Array& Json::as_array() const {
  if (!is_array()) type_error("an array");
  return *std::get<std::shared_ptr<Array>>(value_);
}
const Json::Object& Json::as_object() const {
  if (!is_object()) type_error("an object");
  return *std::get<std::shared_ptr<Object>>(value_);
}
Json::Array& Json::as_array() {
  if (!is_array()) type_error("an array");
  return *std::get<std::shared_ptr<Array>>(value_);
}
Json::Object& Json::as_object() {
  if (!is_object()) type_error("an object");
  return *std::get<std::shared_ptr<Object>>(value_);
}

const Json* Json::find(const std::string& key) const {
  if (!is_object()) return nullptr;
  const Object& object = as_object();
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &it->second;
}

std::string Json::dump(int indent) const {
  std::string out;
  dump_to(out, indent, 0);
  return out;
}

void Json::dump_to(std::string& out, int indent, int depth) const {
  const auto newline = [&](int d) {
    if (indent <= 0) return;
    out += '\n';
    out.append(static_cast<std::size_t>(indent * d), ' ');
  };
  if (is_null()) {
    out += "null";
  } else if (is_bool()) {
    out += as_bool() ? "true" : "false";
  } else if (is_number()) {
    const double d = as_number();
    char buf[32];
    if (!std::isfinite(d)) {
      out += "null";
    } else if (d == std::floor(d) && std::fabs(d) < 9.007199254740992e15) {
      std::snprintf(buf, sizeof buf, "%.0f", d);
      out += buf;
    } else {
      std::snprintf(buf, sizeof buf, "%.17g", d);
      out += buf;
    }
  } else if (is_string()) {
    escape_to(out, as_string());
  } else if (is_array()) {
    const Array& array = as_array();
    out += '[';
    for (std::size_t i = 0; i < array.size(); ++i) {
      if (i > 0) out += ',';
      newline(depth + 1);
      array[i].dump_to(out, indent, depth + 1);
    }
    if (!array.empty()) newline(depth);
    out += ']';
  } else {
    const Object& object = as_object();
    out += '{';
    bool first = true;
    for (const auto& [key, value] : object) {
      if (!first) out += ',';
      first = false;
      newline(depth + 1);
      escape_to(out, key);
      out += indent > 0 ? ": " : ":";
      value.dump_to(out, indent, depth + 1);
    }
    if (!object.empty()) newline(depth);
    out += '}';
  }
}

Json Json::parse(std::string_view text) { return Parser(text).parse_document(); }

}  // namespace resident::audit
