// Initial parameters of the diffusion denoiser (diffusion_model.h), made on the
// host in double from one seeded std::mt19937_64 and stored as float; PyTorch's
// nn.Linear and nn.LayerNorm defaults. Setup only. For every Linear (in the
// slab's tensor order): weight [out, in] kaiming_uniform(a = sqrt(5)) =
// U[-1/sqrt(in), 1/sqrt(in)], then bias [out] U[-1/sqrt(in), 1/sqrt(in)];
// LayerNorm gamma = 1, beta = 0 (no draws).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lib/models/diffusion/diffusion_config.h"

namespace resident::models {

struct DiffusionTensorSpec {
  std::string name;
  std::vector<std::size_t> shape;
  bool decay;  // weight decay: Linear weights yes, biases and LayerNorm no
};

// Every parameter tensor of the denoiser in the slab's order (the names of
// tests/reference/diffusion_reference.h's diffusion_named_tensors).
std::vector<DiffusionTensorSpec> diffusion_tensor_specs(const DiffusionConfig& config,
                                                        const ModelShape& shape);

// Initial values of every tensor, in diffusion_tensor_specs' order.
std::vector<std::vector<float>> diffusion_initial_values(const DiffusionConfig& config,
                                                         const ModelShape& shape,
                                                         std::uint64_t seed);

}  // namespace resident::models
