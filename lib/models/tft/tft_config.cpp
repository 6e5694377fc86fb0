#include "lib/models/tft/tft_config.h"

#include <cmath>
#include <sstream>
#include <string>

#include "kernels/core/error.h"

namespace resident::models {

namespace {

[[noreturn]] void invalid(const std::string& detail, int line) {
  throw Error("TftConfig", "invalid config", detail, __FILE__, line);
}

void require_range(const char* field, std::size_t value, std::size_t low, std::size_t high,
                   int line) {
  if (value < low || value > high)
    invalid(std::string(field) + " = " + std::to_string(value) + ", allowed [" +
                std::to_string(low) + ", " + std::to_string(high) + "]",
            line);
}

std::string levels(const std::vector<float>& q) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < q.size(); ++i) out << (i == 0 ? "" : ", ") << q[i];
  out << "]";
  return out.str();
}

}  // namespace

void validate_tft_config(const TftConfig& config, const ModelShape& shape) {
  require_range("shape.window", shape.window, 1, kTftMaxWindow, __LINE__);
  require_range("shape.features", shape.features, 1, kTftMaxFeatures, __LINE__);
  require_range("shape.outputs", shape.outputs, 1, 1u << 16, __LINE__);
  require_range("shape.max_batch", shape.max_batch, 1, 1u << 20, __LINE__);
  require_range("hidden", config.hidden, 2, kTftMaxHidden, __LINE__);
  require_range("heads", config.heads, 1, config.hidden, __LINE__);
  if (config.hidden % config.heads != 0)
    invalid("hidden = " + std::to_string(config.hidden) + ", allowed a multiple of heads = " +
                std::to_string(config.heads),
            __LINE__);
  require_range("prescale", config.prescale, 1, kTftMaxPrescale, __LINE__);
  require_range("quantiles.size()", config.quantiles.size(), 1, kTftMaxQuantiles, __LINE__);
  bool median = false;
  for (std::size_t i = 0; i < config.quantiles.size(); ++i) {
    const float q = config.quantiles[i];
    if (!(q > 0.0f && q < 1.0f) || (i > 0 && !(q > config.quantiles[i - 1])))
      invalid("quantiles = " + levels(config.quantiles) +
                  ", allowed strictly ascending levels in (0, 1)",
              __LINE__);
    median = median || q == 0.5f;
  }
  if (!median)
    invalid("quantiles = " + levels(config.quantiles) +
                ", allowed only with a 0.5 level (the median the trainer validates)",
            __LINE__);
}

std::size_t tft_median_index(const TftConfig& config) {
  for (std::size_t i = 0; i < config.quantiles.size(); ++i)
    if (config.quantiles[i] == 0.5f) return i;
  invalid("quantiles = " + levels(config.quantiles) + " has no 0.5 level", __LINE__);
}

std::string describe_tft(const TftConfig& config, const ModelShape& shape) {
  return "tft: H " + std::to_string(config.hidden) + ", " + std::to_string(config.heads) +
         " heads, d_c " + std::to_string(config.prescale) + ", quantiles " +
         levels(config.quantiles) + ", L " + std::to_string(shape.window) + ", F " +
         std::to_string(shape.features) + ", " + std::to_string(shape.outputs) + " outputs" +
         (config.fused_variable_grns ? ", fused variable GRNs" : "");
}

}  // namespace resident::models
