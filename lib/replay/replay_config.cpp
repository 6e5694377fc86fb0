#include "lib/replay/replay_config.h"

#include <charconv>
#include <cmath>
#include <string>
#include <system_error>

#include "kernels/core/error.h"

namespace resident {

namespace {

// Shortest decimal text that reads back as `value` ("nan", "inf", "-inf" for non-finite).
std::string number_text(double value) {
  char text[64];
  const auto result = std::to_chars(text, text + sizeof(text), value);
  if (result.ec != std::errc{}) return "?";
  return std::string(text, result.ptr);
}

void append_problem(std::string& problems, const std::string& problem) {
  if (!problems.empty()) problems += "; ";
  problems += problem;
}

void check_count(std::string& problems, const char* field, std::size_t value, std::size_t max) {
  if (value < 1 || value > max)
    append_problem(problems, std::string(field) + " = " + std::to_string(value) + ", allowed [1, " +
                                 std::to_string(max) + "]");
}

// `lower_open`: the lower bound is excluded. `upper` may be infinite (then unbounded, but the
// value must still be finite).
void check_real(std::string& problems, const char* field, double value, double lower,
                bool lower_open, double upper) {
  const bool above_lower = lower_open ? value > lower : value >= lower;
  const bool ok = std::isfinite(value) && above_lower && value <= upper;
  if (ok) return;
  std::string range = std::string(lower_open ? "(" : "[") + number_text(lower) + ", ";
  range += std::isinf(upper) ? "inf), finite" : number_text(upper) + "]";
  append_problem(problems, std::string(field) + " = " + number_text(value) + ", allowed " + range);
}

}  // namespace

void validate(const ReplayConfig& config) {
  std::string problems;
  check_count(problems, "capacity", config.capacity, kMaxReplayCapacity);
  check_count(problems, "state_dim", config.state_dim, kMaxReplayStateDim);
  const double inf = INFINITY;
  check_real(problems, "alpha", config.alpha, 0.0, false, inf);
  check_real(problems, "beta_start", config.beta_start, 0.0, false, 1.0);
  check_real(problems, "beta_max", config.beta_max, 0.0, false, 1.0);
  if (config.beta_start > config.beta_max)
    append_problem(problems, "beta_start = " + number_text(config.beta_start) + " > beta_max = " +
                                 number_text(config.beta_max) + ", allowed beta_start <= beta_max");
  check_real(problems, "epsilon", config.epsilon, 0.0, true, inf);
  if (config.sampling != ReplaySampling::Stratified &&
      config.sampling != ReplaySampling::Independent)
    append_problem(problems, "sampling = " + std::to_string(static_cast<int>(config.sampling)) +
                                 ", allowed Stratified or Independent");
  if (config.mode != ReplayPriorityMode::Proportional && config.mode != ReplayPriorityMode::Rank)
    append_problem(problems, "mode = " + std::to_string(static_cast<int>(config.mode)) +
                                 ", allowed Proportional or Rank");
  if (!problems.empty())
    throw Error("validate(ReplayConfig)", "invalid ReplayConfig", problems, __FILE__, __LINE__);
}

void validate_batch(std::size_t batch, std::size_t size) {
  if (batch >= 1 && batch <= size) return;
  throw Error(
      "validate_batch", "invalid batch size",
      "batch = " + std::to_string(batch) + ", allowed [1, size = " + std::to_string(size) + "]",
      __FILE__, __LINE__);
}

double beta_at(const ReplayConfig& config, std::uint64_t step) {
  if (step >= config.beta_annealing_steps) return config.beta_max;
  const double fraction =
      static_cast<double>(step) / static_cast<double>(config.beta_annealing_steps);
  const double beta = config.beta_start + (config.beta_max - config.beta_start) * fraction;
  return std::fmin(std::fmax(beta, config.beta_start), config.beta_max);
}

}  // namespace resident
