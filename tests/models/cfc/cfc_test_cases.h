// What the GPU CfC tests (cfc_model_test.cu) draw and run against the double reference, shared
// with the CPU test (cfc_reference_test.cpp) that checks the wide cases are well conditioned.
//
// Random parameters: every tensor of the backbone, the heads and the readout U(-a, a) with
// a = min(0.6, kCfcTestWeightGain / sqrt(fan_in)) (fan_in: F + H for the backbone, whose input
// is [x_t, h_{t-1}]; U for the heads; H for the readout); A U(0.5, 1.5); w_tau U(-0.6, 0.6)
// moved 0.2 away from its kink at 0. At the tiny widths (fan_in <= 10) a is 0.6: the backbone
// saturates partly and every path matters. At H 64, U 128 a bound of 0.6 makes the 16-step
// recurrence chaotic: moving every parameter by one float rounding moves a double prediction by
// 0.5 and its gradients reach 4e5, so no fp32 computation can meet the tests' tolerance; the
// fan-in bound keeps it well conditioned (CfcTestCases.WideCasesAreWellConditioned).
//
// The draws are sequential from one std::mt19937_64: the parameters in the slab's order (A and
// w_tau as above; A's first n draws are discarded), then x [batch, L, F] U(-1.5, 1.5) with the
// time column (when named) redrawn per (row, step) in [0.1, 2.5], then the target
// [batch, outputs] U(-1, 1). x is rounded to float (what the GPU sees).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "lib/models/cfc/cfc_config.h"
#include "tests/reference/cfc_reference.h"

namespace resident::test {

// The GPU tests' tolerance: |gpu - ref| <= atol + rtol |ref|.
inline constexpr double kCfcTestRtol = 2e-3;
inline constexpr double kCfcTestAtol = 2e-4;

inline constexpr double kCfcTestWeightLimit = 0.6;
inline constexpr double kCfcTestWeightGain = 2.0;

inline std::vector<double> cfc_uniform(std::size_t n, double low, double high,
                                       std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(low, high);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

inline reference::CfcDims cfc_reference_dims(const models::CfcConfig& c,
                                             const models::ModelShape& s) {
  reference::CfcDims d;
  d.window = s.window;
  d.features = s.features;
  d.outputs = s.outputs;
  d.hidden = c.hidden;
  d.units = c.units;
  d.pure = c.mode == models::CfcMode::Pure;
  d.time_column = c.time_column;
  return d;
}

// The bound a of tensor `name` (see the top); `gain` = INFINITY gives 0.6 everywhere.
inline double cfc_test_weight_limit(const reference::CfcDims& d, std::string_view name,
                                    double gain = kCfcTestWeightGain) {
  double fan_in = 0.0;
  if (name.starts_with("backbone."))
    fan_in = static_cast<double>(d.features + d.hidden);
  else if (name.starts_with("heads."))
    fan_in = static_cast<double>(d.units);
  else if (name.starts_with("readout."))
    fan_in = static_cast<double>(d.hidden);
  return fan_in > 0.0 ? std::min(kCfcTestWeightLimit, gain / std::sqrt(fan_in))
                      : kCfcTestWeightLimit;
}

// Random parameters (double values, not yet rounded to float).
inline reference::CfcParams cfc_random_params(const reference::CfcDims& d, std::mt19937_64& rng,
                                              double gain = kCfcTestWeightGain) {
  reference::CfcParams p = reference::cfc_zero_params(d);
  for (auto& [name, tensor] : reference::cfc_named_tensors(p)) {
    const double a = cfc_test_weight_limit(d, name, gain);
    *tensor = cfc_uniform(tensor->size(), -a, a, rng);
    if (name == "A") *tensor = cfc_uniform(tensor->size(), 0.5, 1.5, rng);
    if (name == "w_tau")
      for (double& w : *tensor) w += w < 0 ? -0.2 : 0.2;
  }
  return p;
}

// x [batch, L, F], rounded to float.
inline std::vector<double> cfc_random_inputs(const reference::CfcDims& d, std::size_t batch,
                                             std::mt19937_64& rng) {
  std::vector<double> x = cfc_uniform(batch * d.window * d.features, -1.5, 1.5, rng);
  if (d.time_column >= 0)
    for (std::size_t r = 0; r < batch * d.window; ++r)
      x[r * d.features + static_cast<std::size_t>(d.time_column)] =
          cfc_uniform(1, 0.1, 2.5, rng)[0];
  for (double& v : x) v = static_cast<double>(static_cast<float>(v));
  return x;
}

// The full small configuration (H 64, U 128: more units than threads per block, several heads
// per thread) at batches that leave the last block of rows partial.
struct CfcWideCase {
  models::CfcConfig config;
  models::ModelShape shape;  // window, features, outputs, max_batch
  std::size_t batch;
  std::uint64_t seed;
};

inline std::vector<CfcWideCase> cfc_wide_cases() {
  models::CfcConfig whole;  // the whole window per launch
  models::CfcConfig by3;
  by3.steps_per_launch = 3;
  models::CfcConfig pure;
  pure.mode = models::CfcMode::Pure;
  pure.steps_per_launch = 5;
  return {{whole, {16, 8, 1, 9}, 9, 78},
          {whole, {16, 8, 1, 5}, 5, 82},
          {by3, {7, 8, 1, 9}, 9, 83},
          {pure, {16, 8, 1, 9}, 9, 84}};
}

}  // namespace resident::test
