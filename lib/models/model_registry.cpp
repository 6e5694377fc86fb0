#include "lib/models/model_registry.h"

#include <functional>
#include <utility>

#include "kernels/core/error.h"
#include "lib/models/cfc/cfc_model.h"
#include "lib/models/diffusion/diffusion_model.h"
#include "lib/models/kan/kan_model.h"
#include "lib/models/mamba2/mamba2_model.h"
#include "lib/models/tft/tft_model.h"
#include "lib/models/tlob/tlob_model.h"
#include "lib/models/xlstm/xlstm_model.h"

namespace resident::models {
namespace {

using Factory = std::function<std::unique_ptr<SupervisedModel>(const ModelShape&, std::uint64_t)>;

// Each model adds one row: its registry name and its factory at the small config.
const std::vector<std::pair<std::string, Factory>>& registry() {
  static const std::vector<std::pair<std::string, Factory>> rows = {
      {"kan", make_kan_model},
      {"mamba2", make_mamba2},
      {"cfc", make_cfc_model},
      {"tlob", make_tlob_model},
      {"xlstm", make_xlstm_model},
      {"diffusion", make_diffusion_model},
      {"tft", make_tft_model},
  };
  return rows;
}

}  // namespace

std::vector<std::string> supervised_model_names() {
  std::vector<std::string> names;
  for (const auto& row : registry()) names.push_back(row.first);
  return names;
}

std::unique_ptr<SupervisedModel> make_supervised_model(std::string_view name,
                                                       const ModelShape& shape,
                                                       std::uint64_t seed) {
  for (const auto& row : registry())
    if (row.first == name) return row.second(shape, seed);
  std::string known;
  for (const auto& row : registry()) known += (known.empty() ? "" : ", ") + row.first;
  throw Error("make_supervised_model", "unknown model",
              "'" + std::string(name) + "'; known models: " + (known.empty() ? "none" : known),
              __FILE__, __LINE__);
}

}  // namespace resident::models
