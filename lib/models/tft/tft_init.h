// The TFT model's slab tensors (names and shapes as tests/reference/tft_reference.h lists them,
// the per-variable GRNs stacked with a leading [F]) and their seeded initialization, PyTorch's
// defaults for the modules the model is made of: every Linear's weight and bias
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (the prescalers are Linear(1, d_c): fan_in 1; the LSTM's
// tensors U(-1/sqrt(H), 1/sqrt(H)), as torch.nn.LSTM); LayerNorm gamma 1, beta 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/models/tft/tft_config.h"

namespace resident::models {

struct TftTensorSpec {
  std::string name;
  std::vector<std::size_t> shape;
  bool decay = false;  // weight decay: the weights (2-D, or 3-D stacks) only
};

// shape: the trainer's (outputs before the quantiles).
std::vector<TftTensorSpec> tft_tensor_specs(const TftConfig& config, const ModelShape& shape);

// One vector per spec, in order; std::mt19937_64 seeded with `seed`, tensors drawn in order.
std::vector<std::vector<float>> tft_initial_values(const TftConfig& config,
                                                   const ModelShape& shape, std::uint64_t seed);

}  // namespace resident::models
