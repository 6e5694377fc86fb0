// A small JSON value with a strict parser and a writer, for the audit's contract files and
// reports. The audit may depend on CUDA, CUPTI and NVTX only, so it carries its own.
// Numbers are doubles (exact for the integer counts the audit writes, up to 2^53).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace resident::audit {

class Json {
 public:
  using Array = std::vector<Json>;
  using Object = std::map<std::string, Json>;  // sorted keys: stable output

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool b) : value_(b) {}
  Json(double d) : value_(d) {}
  Json(int i) : value_(static_cast<double>(i)) {}
  Json(unsigned long long u) : value_(static_cast<double>(u)) {}
  Json(unsigned long u) : value_(static_cast<double>(u)) {}
  Json(long long i) : value_(static_cast<double>(i)) {}
  Json(long i) : value_(static_cast<double>(i)) {}
  Json(std::string s) : value_(std::move(s)) {}
  Json(const char* s) : value_(std::string(s)) {}
  Json(Array a) : value_(std::make_shared<Array>(std::move(a))) {}
  Json(Object o) : value_(std::make_shared<Object>(std::move(o))) {}

  bool is_null() const { return std::holds_alternative<std::monostate>(value_); }
  bool is_bool() const { return std::holds_alternative<bool>(value_); }
  bool is_number() const { return std::holds_alternative<double>(value_); }
  bool is_string() const { return std::holds_alternative<std::string>(value_); }
  bool is_array() const { return std::holds_alternative<std::shared_ptr<Array>>(value_); }
  bool is_object() const { return std::holds_alternative<std::shared_ptr<Object>>(value_); }

  // Accessors throw std::runtime_error naming the expected type when the kind differs.
  bool as_bool() const;
  double as_number() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;
  Array& as_array();
  Object& as_object();

  // Object member or nullptr.
  const Json* find(const std::string& key) const;

  std::string dump(int indent = 2) const;
  // Throws std::runtime_error("line L, column C: <what>") on malformed input.
  static Json parse(std::string_view text);

 private:
  void dump_to(std::string& out, int indent, int depth) const;
  std::variant<std::monostate, bool, double, std::string, std::shared_ptr<Array>,
               std::shared_ptr<Object>>
      value_;
};

}  // namespace resident::audit
