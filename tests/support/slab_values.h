// Random values for a whole parameter slab that respect its layout: every tensor's elements
// drawn uniformly from [low, high), the padding between tensors left at 0 (ParamSlab::upload
// refuses a nonzero padding element). For tests that start gradients (or parameters) from
// random values so a backward must add exactly its share.
#pragma once

#include <random>
#include <vector>

#include "lib/nn/param_slab.h"

namespace resident::test {

inline std::vector<float> random_slab_values(const nn::ParamSlab& slab, std::mt19937_64& rng,
                                             float low = -1.0f, float high = 1.0f) {
  std::vector<float> values(slab.total_elements(), 0.0f);
  std::uniform_real_distribution<float> uniform(low, high);
  for (const auto& tensor : slab.layout().tensors())
    for (std::size_t i = 0; i < tensor.size; ++i) values[tensor.offset + i] = uniform(rng);
  return values;
}

}  // namespace resident::test
