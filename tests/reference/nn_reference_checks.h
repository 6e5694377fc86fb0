// Internal to the nn references: argument checks (throwing resident::Error naming the op and
// the offending argument) and the one place where GradMode is applied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <span>
#include <string>

#include "tests/reference/nn_reference.h"

namespace resident::reference::detail {

// Throws resident::Error("<op>", "invalid argument", detail) unless `condition` holds.
void require(bool condition, const char* op, const std::string& detail,
             std::source_location where = std::source_location::current());

// Throws unless `span_size == expected` ("<name> has <span_size> elements, expected <expected>").
void require_size(const char* op, const char* name, std::size_t span_size, std::size_t expected,
                  std::source_location where = std::source_location::current());

// Like require_size, but an empty span (a gradient that is not wanted) also passes.
void require_size_or_empty(const char* op, const char* name, std::size_t span_size,
                           std::size_t expected,
                           std::source_location where = std::source_location::current());

// Throws unless every element of `mask` is 0 or 1.
void require_binary_mask(const char* op, const char* name, std::span<const std::uint8_t> mask,
                         std::source_location where = std::source_location::current());

inline void write_grad(double& out, double gradient, GradMode mode) {
  if (mode == GradMode::Accumulate) {
    out += gradient;
  } else {
    out = gradient;
  }
}

// out[i] (=|+=) gradient[i] for every i; the sizes must match.
void write_grads(std::span<double> out, std::span<const double> gradient, GradMode mode);

}  // namespace resident::reference::detail
