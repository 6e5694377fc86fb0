// TlobConfig: the TLOB model's widths (MODELS.md section 7) and their validation against a
// ModelShape (errors name the field, its value and the allowed range).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "lib/models/supervised_model.h"

namespace resident::models {

inline constexpr std::size_t kTlobMaxWidth = 1024;   // L, H and the feature count, each
inline constexpr std::size_t kTlobMaxHeads = 16;

struct TlobConfig {
  std::size_t hidden = 64;       // H, the temporal layers' width; a multiple of 4, [4, 1024]
  std::size_t pairs = 4;         // temporal + feature layer pairs, [1, 64]
  std::size_t heads = 1;         // attention heads, [1, 16]
  std::size_t head_limit = 128;  // the head divides its width by 4 while it exceeds this, >= 1
};

// shape.window (L): a multiple of 4 in [4, 1024]; shape.features: [2, 1024]; shape.outputs: the
// class count, [2, 1024]; shape.max_batch >= 1. Throws resident::Error "invalid config" naming
// the first bad field.
void validate_tlob_config(const TlobConfig& config, const ModelShape& shape);

// "tlob: H 64, 4 layer pairs, 1 head, head [256 -> 64 -> 3], L 64, F 32"
std::string describe_tlob(const TlobConfig& config, const ModelShape& shape);

// The head's widths [(H/4)(L/4), ..., classes] (see tests/reference/tlob_reference.h).
std::vector<std::size_t> tlob_head_widths(const TlobConfig& config, const ModelShape& shape);

}  // namespace resident::models
