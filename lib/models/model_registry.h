// The supervised models by name: what the trainer, the CLI and the benches build from a name.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lib/models/supervised_model.h"

namespace resident::models {

// The registered names, in a stable order ("kan", "mamba2", ...).
std::vector<std::string> supervised_model_names();

// The model `name` at its small reference configuration (MODELS.md) for `shape`, its parameters
// initialized from `seed`. Throws resident::Error naming the unknown name and the known ones, or
// naming a shape field out of the model's range.
std::unique_ptr<SupervisedModel> make_supervised_model(std::string_view name,
                                                       const ModelShape& shape,
                                                       std::uint64_t seed);

}  // namespace resident::models
