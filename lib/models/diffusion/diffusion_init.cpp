#include "lib/models/diffusion/diffusion_init.h"

#include <cmath>
#include <random>

#include "lib/nn/initializers.h"

namespace resident::models {

std::vector<DiffusionTensorSpec> diffusion_tensor_specs(const DiffusionConfig& config,
                                                        const ModelShape& shape) {
  const std::size_t D = config.width, O = shape.outputs, flat = shape.window * shape.features;
  std::vector<DiffusionTensorSpec> specs;
  const auto linear = [&](const std::string& name, std::size_t out, std::size_t in) {
    specs.push_back({name + ".weight", {out, in}, true});
    specs.push_back({name + ".bias", {out}, false});
  };
  linear("time.fc1", D, config.time_dim);
  linear("time.fc2", D, D);
  linear("cond.fc1", D, flat);
  linear("cond.fc2", D, D);
  linear("input", D, O + 2 * D);
  for (std::size_t k = 0; k < config.blocks; ++k) {
    const std::string b = "block" + std::to_string(k) + ".";
    specs.push_back({b + "norm.gamma", {D}, false});
    specs.push_back({b + "norm.beta", {D}, false});
    linear(b + "fc1", D, D);
    linear(b + "fc2", D, D);
  }
  linear("output", O, D);
  return specs;
}

std::vector<std::vector<float>> diffusion_initial_values(const DiffusionConfig& config,
                                                         const ModelShape& shape,
                                                         std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const nn::Initializer kaiming = nn::Initializer::kaiming_uniform(std::sqrt(1.0 / 3.0));
  const std::vector<DiffusionTensorSpec> specs = diffusion_tensor_specs(config, shape);
  std::vector<std::vector<float>> values;
  std::size_t fan_in = 1;
  for (const DiffusionTensorSpec& s : specs) {
    const bool gamma = s.name.ends_with("norm.gamma"), beta = s.name.ends_with("norm.beta");
    if (gamma || beta) {
      values.emplace_back(s.shape[0], gamma ? 1.0f : 0.0f);
    } else if (s.shape.size() == 2) {
      fan_in = s.shape[1];
      values.push_back(nn::initial_values(kaiming, s.shape[0], s.shape[1], rng));
    } else {
      const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
      std::uniform_real_distribution<double> u(-bound, bound);
      std::vector<float> bias(s.shape[0]);
      for (float& v : bias) v = static_cast<float>(u(rng));
      values.push_back(std::move(bias));
    }
  }
  return values;
}

}  // namespace resident::models
