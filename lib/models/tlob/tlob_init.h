// The TLOB model's slab tensors (names and shapes as tests/reference/tlob_reference.h lists
// them) and their seeded initialization, as the authors' PyTorch model initializes them: Linear
// weights and biases U(-1/sqrt(in), 1/sqrt(in)); BiN scales l1, l2 Xavier-normal over their
// (n, 1) shape (std sqrt(2 / (n + 1))), shifts 0, mixes y1 = y2 = 0.5; LayerNorm gamma 1, beta 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/models/tlob/tlob_config.h"

namespace resident::models {

struct TlobTensorSpec {
  std::string name;
  std::vector<std::size_t> shape;
  bool decay = false;  // weight decay: the 2-D weights only
};

std::vector<TlobTensorSpec> tlob_tensor_specs(const TlobConfig& config, const ModelShape& shape);

// Layer k's width d, output width o and token count T (even k temporal, odd k feature).
struct TlobLayerDims {
  std::size_t tokens = 0, width = 0, out = 0;
};
std::vector<TlobLayerDims> tlob_layer_dims(const TlobConfig& config, const ModelShape& shape);

// One vector per spec, in order; std::mt19937_64 seeded with `seed`, tensors drawn in order.
std::vector<std::vector<float>> tlob_initial_values(const TlobConfig& config,
                                                    const ModelShape& shape, std::uint64_t seed);

}  // namespace resident::models
