// KanConfig: the configuration of the KAN supervised model (kan_model.h) and its validation, a
// host function that needs no GPU. The small reference configuration (MODELS.md section 4) is the
// default: [L*F -> 64 -> 32 -> outputs], grid G = 5, order k = 3 on [-1, 1].
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "lib/models/supervised_model.h"

namespace resident::models {

// Limits of the fields (the kernels keep a spline order's k + 1 local bases in registers and a
// block's G + k bases per input in shared memory).
inline constexpr std::size_t kKanMaxLayers = 8;       // hidden layers + 1
inline constexpr std::size_t kKanMaxGridSize = 32;    // G
inline constexpr std::size_t kKanMaxSplineOrder = 5;  // k
inline constexpr std::size_t kKanMaxKSplits = 64;

struct KanConfig {
  // Widths of the hidden layers; each >= 1, at most kKanMaxLayers - 1 of them (none: one KAN
  // layer from the flattened window to the outputs).
  std::vector<std::size_t> hidden_widths{64, 32};
  std::size_t grid_size = 5;     // G intervals, [1, kKanMaxGridSize]
  std::size_t spline_order = 3;  // k, [1, kKanMaxSplineOrder]
  double grid_min = -1.0;        // the grid's range: finite, grid_min < grid_max
  double grid_max = 1.0;
  // Performance only (the results are the same algebra; the bits depend on it): the forward GEMM
  // of a layer whose output feeds another layer is split along K into at most this many chunks
  // (one strided-batched cuBLAS call writing partial products, which the next layer's operand
  // kernel adds in a fixed order). The split used is the largest divisor of K that is <= this
  // and leaves chunks of >= kKanMinSplitChunk. 1 leaves the whole K to one cuBLAS call (whose
  // own heuristics may split it). [1, kKanMaxKSplits].
  std::size_t max_k_splits = 32;
};

inline constexpr std::size_t kKanMinSplitChunk = 512;

// Throws resident::Error naming the field, its value and the allowed range when `config` or
// `shape` (window, features, outputs, max_batch >= 1; every layer's operand width
// in * (1 + G + k) and max_batch times it within cuBLAS' int range) is out of range.
void validate_kan_config(const KanConfig& config, const ModelShape& shape);

// Layer widths [L*F, hidden..., outputs].
std::vector<std::size_t> kan_layer_widths(const KanConfig& config, const ModelShape& shape);

// The K split of the forward GEMM of a layer with operand width k_width (see max_k_splits);
// `feeds_next_layer` false (the last layer, which writes the prediction) gives 1.
std::size_t kan_k_splits(const KanConfig& config, std::size_t k_width, bool feeds_next_layer);

// "kan [2048 -> 64 -> 32 -> 1], grid 5, order 3 on [-1, 1], tanh squash, K splits 32/1/1".
std::string describe_kan(const KanConfig& config, const ModelShape& shape);

}  // namespace resident::models
