#include "lib/models/diffusion/diffusion_config.h"

#include <climits>
#include <cmath>
#include <limits>
#include <sstream>

#include "kernels/core/error.h"

namespace resident::models {

namespace {

[[noreturn]] void invalid(const std::string& detail, int line) {
  throw Error("DiffusionConfig", "invalid config", detail, __FILE__, line);
}

void require_range(const std::string& field, std::size_t value, std::size_t low, std::size_t high,
                   int line) {
  if (value < low || value > high)
    invalid(field + " = " + std::to_string(value) + ", allowed [" + std::to_string(low) + ", " +
                std::to_string(high) + "]",
            line);
}

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

DiffusionSchedule diffusion_schedule_from_name(std::string_view name) {
  if (name == "linear") return DiffusionSchedule::Linear;
  if (name == "cosine") return DiffusionSchedule::Cosine;
  throw Error("diffusion_schedule_from_name", "invalid argument",
              "schedule = '" + std::string(name) + "', allowed 'linear' or 'cosine'", __FILE__,
              __LINE__);
}

std::string_view diffusion_schedule_name(DiffusionSchedule schedule) noexcept {
  return schedule == DiffusionSchedule::Linear ? "linear" : "cosine";
}

DiffusionVariance diffusion_variance_from_name(std::string_view name) {
  if (name == "fixedsmall") return DiffusionVariance::FixedSmall;
  if (name == "fixedlarge") return DiffusionVariance::FixedLarge;
  throw Error("diffusion_variance_from_name", "invalid argument",
              "variance = '" + std::string(name) + "', allowed 'fixedsmall' or 'fixedlarge'",
              __FILE__, __LINE__);
}

std::string_view diffusion_variance_name(DiffusionVariance variance) noexcept {
  return variance == DiffusionVariance::FixedSmall ? "fixedsmall" : "fixedlarge";
}

void validate_diffusion_config(const DiffusionConfig& config, const ModelShape& shape) {
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  constexpr auto kInt = static_cast<std::size_t>(INT_MAX);
  require_range("shape.window", shape.window, 1, kMax, __LINE__);
  require_range("shape.features", shape.features, 1, kMax, __LINE__);
  require_range("shape.outputs", shape.outputs, 1, kDiffusionMaxOutputs, __LINE__);
  require_range("shape.max_batch", shape.max_batch, 1, kMax, __LINE__);
  require_range("steps", config.steps, 2, kDiffusionMaxSteps, __LINE__);
  require_range("width", config.width, 1, kDiffusionMaxWidth, __LINE__);
  if (config.fused_sampler_blocks)
    require_range("width (fused_sampler_blocks)", config.width, 1, kDiffusionFusedMaxWidth,
                  __LINE__);
  require_range("blocks", config.blocks, 1, kDiffusionMaxBlocks, __LINE__);
  require_range("time_dim", config.time_dim, 4, kDiffusionMaxWidth, __LINE__);
  if (config.time_dim % 2 != 0)
    invalid("time_dim = " + std::to_string(config.time_dim) + ", allowed an even value", __LINE__);
  require_range("samples", config.samples, 1, kDiffusionMaxSamples, __LINE__);
  require_range("quantiles.size()", config.quantiles.size(), 0, kDiffusionMaxQuantiles, __LINE__);
  for (std::size_t i = 0; i < config.quantiles.size(); ++i) {
    const double q = config.quantiles[i];
    if (!(q >= 0.0 && q <= 1.0))
      invalid("quantiles[" + std::to_string(i) + "] = " + number(q) + ", allowed [0, 1]", __LINE__);
  }
  // GEMM dimensions: the window's flattened width (the history MLP's K) and the
  // sampler's rows.
  if (shape.window > kInt / shape.features)
    invalid("shape.window * shape.features = " + std::to_string(shape.window) + " * " +
                std::to_string(shape.features) + ", allowed <= " + std::to_string(kInt),
            __LINE__);
  const std::size_t flat = shape.window * shape.features;
  if (flat > kInt / config.width)
    invalid("shape.window * shape.features = " + std::to_string(flat) + ", allowed <= " +
                std::to_string(kInt / config.width) + " (the history weight's elements)",
            __LINE__);
  const std::size_t row_limit = kInt / (2 * config.width + shape.outputs);
  if (shape.max_batch > row_limit / config.samples)
    invalid("shape.max_batch = " + std::to_string(shape.max_batch) +
                ", allowed <= " + std::to_string(row_limit / config.samples) +
                " (max_batch * samples = " + std::to_string(config.samples) +
                " sampler rows within cuBLAS' int range)",
            __LINE__);
}

std::string describe_diffusion(const DiffusionConfig& config, const ModelShape& shape) {
  std::ostringstream out;
  out << "diffusion T=" << config.steps << " " << diffusion_schedule_name(config.schedule) << " "
      << diffusion_variance_name(config.variance) << ", denoiser [x_t " << shape.outputs
      << " | history " << shape.window * shape.features << " -> " << config.width << " | time "
      << config.time_dim << " -> " << config.width << "] -> " << config.width << " x "
      << config.blocks << " blocks -> " << shape.outputs << ", " << config.samples
      << " samples per window";
  if (config.fused_sampler_blocks) out << ", fused sampler blocks";
  return out.str();
}

}  // namespace resident::models
