// TftConfig: the Temporal Fusion Transformer's widths and quantile levels (MODELS.md section 3)
// and their validation against a ModelShape (errors name the field, its value and the allowed
// range).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "lib/models/supervised_model.h"

namespace resident::models {

inline constexpr std::size_t kTftMaxHidden = 64;     // the LSTM kernels keep 4H gate units a block
inline constexpr std::size_t kTftMaxWindow = 1024;   // the attention kernels: one thread a step
inline constexpr std::size_t kTftMaxFeatures = 256;
inline constexpr std::size_t kTftMaxPrescale = 64;
inline constexpr std::size_t kTftMaxQuantiles = 16;

struct TftConfig {
  std::size_t hidden = 32;   // H: the GRNs, the LSTM, the attention; [2, 64], a multiple of heads
  std::size_t heads = 4;     // attention heads, [1, hidden]
  std::size_t prescale = 8;  // d_c, each input variable's prescaler width, [1, kTftMaxPrescale]
  // Ascending, each in (0, 1), one of them 0.5 (the median the trainer validates with MSE);
  // [1, 16] levels.
  std::vector<float> quantiles = {0.1f, 0.5f, 0.9f};
  // The F per-variable GRNs as one fused kernel forward and one backward (plus a fixed-order
  // reduction; kernels/models/tft/tft_variable_grn.h) instead of strided-batched GEMMs and
  // elementwise kernels over [N, F, H] intermediates. Same math, another summation order (not bit
  // equal to the unfused path); off by default. describe() names it when on.
  bool fused_variable_grns = false;
};

// shape (the trainer's: outputs = horizon * target columns, before the quantiles): window
// [1, 1024], features [1, 256], outputs >= 1, max_batch >= 1. Throws resident::Error
// "invalid config" naming the first bad field.
void validate_tft_config(const TftConfig& config, const ModelShape& shape);

// The index of the 0.5 level in config.quantiles.
std::size_t tft_median_index(const TftConfig& config);

// "tft: H 32, 4 heads, d_c 8, quantiles [0.1, 0.5, 0.9], L 64, F 32, 1 outputs", with
// ", fused variable GRNs" appended when config.fused_variable_grns (a checkpoint's fingerprint
// holds describe(): one saved by the other path is refused).
std::string describe_tft(const TftConfig& config, const ModelShape& shape);

}  // namespace resident::models
