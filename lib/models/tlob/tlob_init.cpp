#include "lib/models/tlob/tlob_init.h"

#include <cmath>
#include <random>

namespace resident::models {

std::vector<TlobLayerDims> tlob_layer_dims(const TlobConfig& config, const ModelShape& shape) {
  std::vector<TlobLayerDims> dims;
  for (std::size_t k = 0; k < 2 * config.pairs; ++k) {
    TlobLayerDims d;
    const bool temporal = k % 2 == 0, last = k / 2 + 1 == config.pairs;
    d.width = temporal ? config.hidden : shape.window;
    d.out = last ? d.width / 4 : d.width;
    d.tokens = temporal ? shape.window : dims.back().out;
    dims.push_back(d);
  }
  return dims;
}

std::vector<TlobTensorSpec> tlob_tensor_specs(const TlobConfig& config, const ModelShape& shape) {
  validate_tlob_config(config, shape);
  const std::size_t L = shape.window, F = shape.features, H = config.hidden, nh = config.heads;
  std::vector<TlobTensorSpec> s = {{"bin.l1", {L}, false},     {"bin.b1", {L}, false},
                                   {"bin.l2", {F}, false},     {"bin.b2", {F}, false},
                                   {"bin.y1", {1}, false},     {"bin.y2", {1}, false},
                                   {"embed.weight", {H, F}, true}, {"embed.bias", {H}, false}};
  const std::vector<TlobLayerDims> layers = tlob_layer_dims(config, shape);
  for (std::size_t k = 0; k < layers.size(); ++k) {
    const std::string p = "layer" + std::to_string(k) + ".";
    const std::size_t d = layers[k].width, o = layers[k].out;
    s.push_back({p + "qkv.weight", {3 * d * nh, d}, true});
    s.push_back({p + "qkv.bias", {3 * d * nh}, false});
    s.push_back({p + "out.weight", {d, d * nh}, true});
    s.push_back({p + "out.bias", {d}, false});
    s.push_back({p + "norm.gamma", {d}, false});
    s.push_back({p + "norm.beta", {d}, false});
    s.push_back({p + "fc1.weight", {4 * d, d}, true});
    s.push_back({p + "fc1.bias", {4 * d}, false});
    s.push_back({p + "fc2.weight", {o, 4 * d}, true});
    s.push_back({p + "fc2.bias", {o}, false});
  }
  const std::vector<std::size_t> w = tlob_head_widths(config, shape);
  for (std::size_t j = 0; j + 1 < w.size(); ++j) {
    s.push_back({"head" + std::to_string(j) + ".weight", {w[j + 1], w[j]}, true});
    s.push_back({"head" + std::to_string(j) + ".bias", {w[j + 1]}, false});
  }
  return s;
}

std::vector<std::vector<float>> tlob_initial_values(const TlobConfig& config,
                                                    const ModelShape& shape, std::uint64_t seed) {
  const std::vector<TlobTensorSpec> specs = tlob_tensor_specs(config, shape);
  std::mt19937_64 rng(seed);
  std::vector<std::vector<float>> values;
  // The fan-in of each Linear: its weight's second dimension; a bias follows its weight.
  std::size_t fan_in = 1;
  for (const TlobTensorSpec& t : specs) {
    std::size_t n = 1;
    for (const std::size_t d : t.shape) n *= d;
    std::vector<float> v(n, 0.0f);
    const std::string& name = t.name;
    const auto ends_with = [&](const char* suffix) {
      const std::string s(suffix);
      return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    if (name == "bin.l1" || name == "bin.l2") {
      std::normal_distribution<double> normal(0.0, std::sqrt(2.0 / static_cast<double>(n + 1)));
      for (float& x : v) x = static_cast<float>(normal(rng));
    } else if (name == "bin.y1" || name == "bin.y2") {
      v[0] = 0.5f;
    } else if (ends_with("gamma")) {
      for (float& x : v) x = 1.0f;
    } else if (ends_with(".weight") || ends_with(".bias")) {
      if (ends_with(".weight")) fan_in = t.shape[1];
      const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
      std::uniform_real_distribution<double> u(-bound, bound);
      for (float& x : v) x = static_cast<float>(u(rng));
    }
    values.push_back(std::move(v));
  }
  return values;
}

}  // namespace resident::models
