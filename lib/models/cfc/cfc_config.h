// CfcConfig: the configuration of the Liquid CfC supervised model (cfc_model.h, MODELS.md section
// 5) and its validation, a host function that needs no GPU. The defaults are the small reference
// configuration: H = 64 hidden units, a one-layer backbone of U = 128 units, the "default" cell,
// ts = 1 at every step.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "lib/models/supervised_model.h"

namespace resident::models {

enum class CfcMode {
  Default,  // h = f1 (1 - s) + s f2, f1, f2 = tanh heads, s = sigmoid(t_a ts + t_b)
  Pure,     // h = -A exp(-ts (|w_tau| + |f|)) f + A, f a linear head (no tanh)
};

// "default" or "pure"; anything else throws resident::Error naming the allowed names.
CfcMode cfc_mode_from_name(std::string_view name);
std::string_view cfc_mode_name(CfcMode mode) noexcept;

// Limits: the step kernels keep rows x (H + U + heads H) floats in shared memory.
inline constexpr std::size_t kCfcMaxWidth = 1024;  // H and U

struct CfcConfig {
  std::size_t hidden = 64;  // H, [1, kCfcMaxWidth]
  std::size_t units = 128;  // U, the backbone's width, [1, kCfcMaxWidth]
  CfcMode mode = CfcMode::Default;
  // -1: every step's elapsed time ts is 1. Otherwise the input column [0, F) holding ts per step
  // (irregular sampling); the column also stays an input of the backbone.
  long time_column = -1;
  // Performance only (the results are the same bits): time steps per launch of the recurrent
  // kernels. 0 runs the whole window in one launch of each (rows are independent, so a block
  // carries its rows through every step); k > 0 launches once per k steps. [0, window].
  std::size_t steps_per_launch = 0;
};

// Throws resident::Error naming the field, its value and the allowed range when `config` or
// `shape` (window, features, outputs, max_batch >= 1; window * max_batch and every GEMM dimension
// within cuBLAS' int range) is out of range.
void validate_cfc_config(const CfcConfig& config, const ModelShape& shape);

// Heads stacked in the heads GEMM: 4 (ff1, ff2, time_a, time_b) for Default, 1 (ff1) for Pure.
std::size_t cfc_head_count(CfcMode mode) noexcept;

// "cfc default H=64 U=128 backbone 1 layer, ts = 1, steps per launch all".
std::string describe_cfc(const CfcConfig& config, const ModelShape& shape);

}  // namespace resident::models
