#include "lib/models/kan/kan_config.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <sstream>

#include "kernels/core/error.h"

namespace resident::models {

namespace {

[[noreturn]] void invalid(const std::string& detail, int line) {
  throw Error("KanConfig", "invalid config", detail, __FILE__, line);
}

void require_range(const char* field, std::size_t value, std::size_t low, std::size_t high,
                   int line) {
  if (value < low || value > high)
    invalid(std::string(field) + " = " + std::to_string(value) + ", allowed [" +
                std::to_string(low) + ", " + std::to_string(high) + "]",
            line);
}

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

void validate_kan_config(const KanConfig& config, const ModelShape& shape) {
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  require_range("shape.window", shape.window, 1, kMax, __LINE__);
  require_range("shape.features", shape.features, 1, kMax, __LINE__);
  require_range("shape.outputs", shape.outputs, 1, kMax, __LINE__);
  require_range("shape.max_batch", shape.max_batch, 1, kMax, __LINE__);
  require_range("hidden_widths.size()", config.hidden_widths.size(), 0, kKanMaxLayers - 1,
                __LINE__);
  for (std::size_t l = 0; l < config.hidden_widths.size(); ++l)
    require_range(("hidden_widths[" + std::to_string(l) + "]").c_str(), config.hidden_widths[l], 1,
                  kMax, __LINE__);
  require_range("grid_size", config.grid_size, 1, kKanMaxGridSize, __LINE__);
  require_range("spline_order", config.spline_order, 1, kKanMaxSplineOrder, __LINE__);
  if (!std::isfinite(config.grid_min))
    invalid("grid_min = " + number(config.grid_min) + ", allowed a finite value", __LINE__);
  if (!std::isfinite(config.grid_max) || !(config.grid_max > config.grid_min))
    invalid("grid_max = " + number(config.grid_max) + ", allowed finite and > grid_min = " +
                number(config.grid_min),
            __LINE__);
  require_range("max_k_splits", config.max_k_splits, 1, kKanMaxKSplits, __LINE__);

  // cuBLAS takes int dimensions and leading dimensions; the operand [max_batch, in * (1+G+k)] is
  // indexed in size_t by the kernels but its width is a leading dimension.
  const std::size_t per_input = 1 + config.grid_size + config.spline_order;
  if (shape.window > kMax / shape.features)
    invalid("shape.window * shape.features overflows", __LINE__);
  const std::vector<std::size_t> widths = kan_layer_widths(config, shape);
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    const std::string name = l == 0 ? "shape.window * shape.features"
                                    : "hidden_widths[" + std::to_string(l - 1) + "]";
    const std::size_t limit = static_cast<std::size_t>(INT_MAX) / per_input;
    if (widths[l] > limit)
      invalid(name + " = " + std::to_string(widths[l]) + ", allowed [1, " +
                  std::to_string(limit) + "] (the layer's operand width " + "in * (1 + G + k) " +
                  "must fit cuBLAS' int)",
              __LINE__);
    const std::size_t k_width = widths[l] * per_input;
    if (shape.max_batch > static_cast<std::size_t>(INT_MAX) / k_width ||
        widths[l + 1] > static_cast<std::size_t>(INT_MAX) / k_width)
      invalid("shape.max_batch = " + std::to_string(shape.max_batch) + " and layer " +
                  std::to_string(l) + " (in " + std::to_string(widths[l]) + ", out " +
                  std::to_string(widths[l + 1]) + "): its operand or weight exceeds " +
                  std::to_string(INT_MAX) + " elements",
              __LINE__);
  }
}

std::vector<std::size_t> kan_layer_widths(const KanConfig& config, const ModelShape& shape) {
  std::vector<std::size_t> widths{shape.window * shape.features};
  widths.insert(widths.end(), config.hidden_widths.begin(), config.hidden_widths.end());
  widths.push_back(shape.outputs);
  return widths;
}

std::size_t kan_k_splits(const KanConfig& config, std::size_t k_width, bool feeds_next_layer) {
  if (!feeds_next_layer) return 1;
  const std::size_t cap = std::min(config.max_k_splits, k_width / kKanMinSplitChunk);
  for (std::size_t s = cap; s > 1; --s)
    if (k_width % s == 0) return s;
  return 1;
}

std::string describe_kan(const KanConfig& config, const ModelShape& shape) {
  const std::vector<std::size_t> widths = kan_layer_widths(config, shape);
  const std::size_t per_input = 1 + config.grid_size + config.spline_order;
  std::string text = "kan [";
  for (std::size_t l = 0; l < widths.size(); ++l)
    text += (l == 0 ? "" : " -> ") + std::to_string(widths[l]);
  text += "], grid " + std::to_string(config.grid_size) + ", order " +
          std::to_string(config.spline_order) + " on [" + number(config.grid_min) + ", " +
          number(config.grid_max) + "], tanh squash, K splits ";
  for (std::size_t l = 0; l + 1 < widths.size(); ++l)
    text += (l == 0 ? "" : "/") +
            std::to_string(kan_k_splits(config, widths[l] * per_input, l + 2 < widths.size()));
  return text;
}

}  // namespace resident::models
