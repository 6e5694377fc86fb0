#include "tests/reference/nn_reference_checks.h"

#include "kernels/core/error.h"

namespace resident::reference::detail {

void require(bool condition, const char* op, const std::string& detail,
             std::source_location where) {
  if (!condition) {
    throw Error(op, "invalid argument", detail, where.file_name(), static_cast<int>(where.line()));
  }
}

void require_size(const char* op, const char* name, std::size_t span_size, std::size_t expected,
                  std::source_location where) {
  require(span_size == expected, op,
          std::string(name) + " has " + std::to_string(span_size) + " elements, expected " +
              std::to_string(expected),
          where);
}

void require_size_or_empty(const char* op, const char* name, std::size_t span_size,
                           std::size_t expected, std::source_location where) {
  if (span_size != 0) require_size(op, name, span_size, expected, where);
}

void require_binary_mask(const char* op, const char* name, std::span<const std::uint8_t> mask,
                         std::source_location where) {
  for (const std::uint8_t value : mask) {
    require(value <= 1, op, std::string(name) + " holds " + std::to_string(value) + ", not 0 or 1",
            where);
  }
}

void write_grads(std::span<double> out, std::span<const double> gradient, GradMode mode) {
  require_size("write_grads", "out", out.size(), gradient.size());
  for (std::size_t i = 0; i < out.size(); ++i) write_grad(out[i], gradient[i], mode);
}

}  // namespace resident::reference::detail
