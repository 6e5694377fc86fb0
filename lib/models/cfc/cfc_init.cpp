#include "lib/models/cfc/cfc_init.h"

#include <cmath>
#include <random>

namespace resident::models {

namespace {

std::vector<float> uniform(std::size_t n, double bound, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-bound, bound);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(u(rng));
  return v;
}

}  // namespace

std::vector<CfcTensorSpec> cfc_tensor_specs(const CfcConfig& config, const ModelShape& shape) {
  const std::size_t F = shape.features, H = config.hidden, U = config.units;
  const std::size_t G = cfc_head_count(config.mode) * H;
  std::vector<CfcTensorSpec> specs = {{"backbone.input_weight", {U, F}, true},
                                      {"backbone.recurrent_weight", {U, H}, true},
                                      {"backbone.bias", {U}, false},
                                      {"heads.weight", {G, U}, true},
                                      {"heads.bias", {G}, false}};
  if (config.mode == CfcMode::Pure) {
    specs.push_back({"w_tau", {H}, false});
    specs.push_back({"A", {H}, false});
  }
  specs.push_back({"readout.weight", {shape.outputs, H}, true});
  specs.push_back({"readout.bias", {shape.outputs}, false});
  return specs;
}

std::vector<std::vector<float>> cfc_initial_values(const CfcConfig& config,
                                                   const ModelShape& shape, std::uint64_t seed) {
  validate_cfc_config(config, shape);
  const std::size_t F = shape.features, H = config.hidden, U = config.units;
  const std::size_t heads = cfc_head_count(config.mode);
  std::mt19937_64 rng(seed);
  std::vector<std::vector<float>> values;
  const std::vector<float> backbone =
      uniform(U * (F + H), std::sqrt(6.0 / static_cast<double>(F + H + U)), rng);
  std::vector<float> input(U * F), recurrent(U * H);
  for (std::size_t k = 0; k < U; ++k) {
    for (std::size_t f = 0; f < F; ++f) input[k * F + f] = backbone[k * (F + H) + f];
    for (std::size_t j = 0; j < H; ++j) recurrent[k * H + j] = backbone[k * (F + H) + F + j];
  }
  values.push_back(std::move(input));
  values.push_back(std::move(recurrent));
  values.push_back(uniform(U, 1.0 / std::sqrt(static_cast<double>(F + H)), rng));
  std::vector<float> heads_weight;
  for (std::size_t c = 0; c < heads; ++c) {
    const std::vector<float> block =
        uniform(H * U, std::sqrt(6.0 / static_cast<double>(U + H)), rng);
    heads_weight.insert(heads_weight.end(), block.begin(), block.end());
  }
  values.push_back(std::move(heads_weight));
  values.push_back(uniform(heads * H, 1.0 / std::sqrt(static_cast<double>(U)), rng));
  if (config.mode == CfcMode::Pure) {
    values.emplace_back(H, 0.0f);
    values.emplace_back(H, 1.0f);
  }
  const double readout_bound = 1.0 / std::sqrt(static_cast<double>(H));
  values.push_back(uniform(shape.outputs * H, readout_bound, rng));
  values.push_back(uniform(shape.outputs, readout_bound, rng));
  return values;
}

}  // namespace resident::models
