#include "lib/models/cfc/cfc_config.h"

#include <climits>
#include <limits>

#include "kernels/core/error.h"
#include "kernels/models/cfc/cfc_step_shape.h"

namespace resident::models {

namespace {

[[noreturn]] void invalid(const std::string& detail, int line) {
  throw Error("CfcConfig", "invalid config", detail, __FILE__, line);
}

void require_range(const char* field, std::size_t value, std::size_t low, std::size_t high,
                   int line) {
  if (value < low || value > high)
    invalid(std::string(field) + " = " + std::to_string(value) + ", allowed [" +
                std::to_string(low) + ", " + std::to_string(high) + "]",
            line);
}

}  // namespace

CfcMode cfc_mode_from_name(std::string_view name) {
  if (name == "default") return CfcMode::Default;
  if (name == "pure") return CfcMode::Pure;
  throw Error("cfc_mode_from_name", "invalid argument",
              "mode = '" + std::string(name) + "', allowed 'default' or 'pure'", __FILE__,
              __LINE__);
}

std::string_view cfc_mode_name(CfcMode mode) noexcept {
  return mode == CfcMode::Pure ? "pure" : "default";
}

std::size_t cfc_head_count(CfcMode mode) noexcept { return mode == CfcMode::Pure ? 1 : 4; }

void validate_cfc_config(const CfcConfig& config, const ModelShape& shape) {
  constexpr std::size_t kInt = static_cast<std::size_t>(INT_MAX);
  require_range("shape.window", shape.window, 1, kInt, __LINE__);
  require_range("shape.features", shape.features, 1, kInt, __LINE__);
  require_range("shape.outputs", shape.outputs, 1, kInt, __LINE__);
  require_range("shape.max_batch", shape.max_batch, 1, kInt, __LINE__);
  require_range("hidden", config.hidden, 1, kCfcMaxWidth, __LINE__);
  require_range("units", config.units, 1, kCfcMaxWidth, __LINE__);
  if (config.mode != CfcMode::Default && config.mode != CfcMode::Pure)
    invalid("mode = " + std::to_string(static_cast<int>(config.mode)) +
                ", allowed Default or Pure",
            __LINE__);
  if (config.time_column < -1 || config.time_column >= static_cast<long>(shape.features))
    invalid("time_column = " + std::to_string(config.time_column) + ", allowed [-1, " +
                std::to_string(shape.features - 1) + "] (-1: ts = 1)",
            __LINE__);
  const std::size_t shared = kernels::cfc::cfc_step_shared_bytes(config.hidden, config.units,
                                                                 cfc_head_count(config.mode));
  if (shared > kernels::cfc::kCfcMaxStepSharedBytes)
    invalid("hidden = " + std::to_string(config.hidden) + " and units = " +
                std::to_string(config.units) + ": the step kernels need " +
                std::to_string(shared) + " bytes of shared memory, allowed <= " +
                std::to_string(kernels::cfc::kCfcMaxStepSharedBytes),
            __LINE__);
  require_range("steps_per_launch", config.steps_per_launch, 0, shape.window, __LINE__);
  // The weight-gradient GEMMs run over window * batch rows (an int in cuBLAS); the widest row
  // any buffer has is max(F, heads * H, U).
  if (shape.max_batch > kInt / shape.window)
    invalid("shape.max_batch = " + std::to_string(shape.max_batch) + " with shape.window = " +
                std::to_string(shape.window) + ": window * max_batch exceeds " +
                std::to_string(INT_MAX),
            __LINE__);
}

std::string describe_cfc(const CfcConfig& config, const ModelShape& shape) {
  std::string text = "cfc " + std::string(cfc_mode_name(config.mode)) +
                     " H=" + std::to_string(config.hidden) + " U=" + std::to_string(config.units) +
                     " backbone 1 layer, ";
  text += config.time_column < 0 ? std::string("ts = 1")
                                 : "ts from column " + std::to_string(config.time_column);
  const std::size_t k = config.steps_per_launch == 0 ? shape.window : config.steps_per_launch;
  text += ", " + std::to_string(k) + " steps per launch";
  return text;
}

}  // namespace resident::models
