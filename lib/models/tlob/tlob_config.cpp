#include "lib/models/tlob/tlob_config.h"

#include <string>

#include "kernels/core/error.h"

namespace resident::models {

namespace {

[[noreturn]] void invalid(const std::string& detail, int line) {
  throw Error("TlobConfig", "invalid config", detail, __FILE__, line);
}

void require_range(const char* field, std::size_t value, std::size_t low, std::size_t high,
                   int line) {
  if (value < low || value > high)
    invalid(std::string(field) + " = " + std::to_string(value) + ", allowed [" +
                std::to_string(low) + ", " + std::to_string(high) + "]",
            line);
}

void require_multiple_of_4(const char* field, std::size_t value, int line) {
  if (value % 4 != 0)
    invalid(std::string(field) + " = " + std::to_string(value) +
                ", allowed a multiple of 4 (the last layer pair divides it by 4)",
            line);
}

}  // namespace

void validate_tlob_config(const TlobConfig& config, const ModelShape& shape) {
  require_range("shape.window", shape.window, 4, kTlobMaxWidth, __LINE__);
  require_multiple_of_4("shape.window", shape.window, __LINE__);
  require_range("shape.features", shape.features, 2, kTlobMaxWidth, __LINE__);
  if (shape.outputs < 2 || shape.outputs > kTlobMaxWidth)
    invalid("shape.outputs = " + std::to_string(shape.outputs) +
                ", allowed [2, 1024]: TLOB is a classifier, outputs = the class count",
            __LINE__);
  require_range("shape.max_batch", shape.max_batch, 1, 1u << 20, __LINE__);
  require_range("hidden", config.hidden, 4, kTlobMaxWidth, __LINE__);
  require_multiple_of_4("hidden", config.hidden, __LINE__);
  require_range("pairs", config.pairs, 1, 64, __LINE__);
  require_range("heads", config.heads, 1, kTlobMaxHeads, __LINE__);
  require_range("head_limit", config.head_limit, 1, 1u << 20, __LINE__);
}

std::vector<std::size_t> tlob_head_widths(const TlobConfig& config, const ModelShape& shape) {
  std::vector<std::size_t> w{(config.hidden / 4) * (shape.window / 4)};
  while (w.back() > config.head_limit && w.back() / 4 >= 1) w.push_back(w.back() / 4);
  w.push_back(shape.outputs);
  return w;
}

std::string describe_tlob(const TlobConfig& config, const ModelShape& shape) {
  std::string head;
  for (const std::size_t w : tlob_head_widths(config, shape))
    head += (head.empty() ? "" : " -> ") + std::to_string(w);
  return "tlob: H " + std::to_string(config.hidden) + ", " + std::to_string(config.pairs) +
         " layer pairs, " + std::to_string(config.heads) +
         (config.heads == 1 ? " head" : " heads") +
         ", head [" + head + "], L " + std::to_string(shape.window) + ", F " +
         std::to_string(shape.features);
}

}  // namespace resident::models
