#include "lib/models/tft/tft_init.h"

#include <cmath>
#include <random>

namespace resident::models {

namespace {

struct GrnSize {
  std::size_t in, hidden, out;
};

void add_grn(std::vector<TftTensorSpec>& s, const std::string& p, const GrnSize& g,
             std::size_t stack) {
  const auto shape = [&](std::vector<std::size_t> dims) {
    if (stack > 0) dims.insert(dims.begin(), stack);
    return dims;
  };
  s.push_back({p + ".fc1.weight", shape({g.hidden, g.in}), true});
  s.push_back({p + ".fc1.bias", shape({g.hidden}), false});
  s.push_back({p + ".fc2.weight", shape({g.hidden, g.hidden}), true});
  s.push_back({p + ".fc2.bias", shape({g.hidden}), false});
  s.push_back({p + ".glu.weight", shape({2 * g.out, g.hidden}), true});
  s.push_back({p + ".glu.bias", shape({2 * g.out}), false});
  s.push_back({p + ".norm.gamma", shape({g.out}), false});
  s.push_back({p + ".norm.beta", shape({g.out}), false});
  if (g.in != g.out) {
    s.push_back({p + ".skip.weight", shape({g.out, g.in}), true});
    s.push_back({p + ".skip.bias", shape({g.out}), false});
  }
}

void add_gate(std::vector<TftTensorSpec>& s, const std::string& p, std::size_t h) {
  s.push_back({p + ".glu.weight", {2 * h, h}, true});
  s.push_back({p + ".glu.bias", {2 * h}, false});
  s.push_back({p + ".norm.gamma", {h}, false});
  s.push_back({p + ".norm.beta", {h}, false});
}

bool ends_with(const std::string& name, const std::string& suffix) {
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<TftTensorSpec> tft_tensor_specs(const TftConfig& config, const ModelShape& shape) {
  validate_tft_config(config, shape);
  const std::size_t F = shape.features, H = config.hidden, dc = config.prescale;
  const std::size_t dv = H / config.heads;
  std::vector<TftTensorSpec> s;
  s.push_back({"prescale.weight", {F, dc}, false});
  s.push_back({"prescale.bias", {F, dc}, false});
  add_grn(s, "vsn_flat", {F * dc, H, F}, 0);
  add_grn(s, "vsn_var", {dc, H, H}, F);
  s.push_back({"lstm.input_weight", {4 * H, H}, true});
  s.push_back({"lstm.recurrent_weight", {4 * H, H}, true});
  s.push_back({"lstm.bias", {4 * H}, false});
  add_gate(s, "lstm_gate", H);
  add_grn(s, "enrich", {H, H, H}, 0);
  s.push_back({"attn.query.weight", {H, H}, true});
  s.push_back({"attn.query.bias", {H}, false});
  s.push_back({"attn.key.weight", {H, H}, true});
  s.push_back({"attn.key.bias", {H}, false});
  s.push_back({"attn.value.weight", {dv, H}, true});
  s.push_back({"attn.value.bias", {dv}, false});
  s.push_back({"attn.out.weight", {H, dv}, true});
  add_gate(s, "attn_gate", H);
  add_grn(s, "ff", {H, H, H}, 0);
  add_gate(s, "out_gate", H);
  s.push_back({"head.weight", {shape.outputs * config.quantiles.size(), H}, true});
  s.push_back({"head.bias", {shape.outputs * config.quantiles.size()}, false});
  return s;
}

std::vector<std::vector<float>> tft_initial_values(const TftConfig& config,
                                                   const ModelShape& shape, std::uint64_t seed) {
  const std::vector<TftTensorSpec> specs = tft_tensor_specs(config, shape);
  std::mt19937_64 rng(seed);
  std::vector<std::vector<float>> values;
  std::size_t fan_in = 1;  // of the last weight: a bias follows its weight
  for (const TftTensorSpec& t : specs) {
    std::size_t n = 1;
    for (const std::size_t d : t.shape) n *= d;
    std::vector<float> v(n, 0.0f);
    if (ends_with(t.name, ".gamma")) {
      for (float& x : v) x = 1.0f;
    } else if (!ends_with(t.name, ".beta")) {
      if (t.name == "prescale.weight")
        fan_in = 1;
      else if (t.name.rfind("lstm.", 0) == 0)
        fan_in = config.hidden;
      else if (ends_with(t.name, ".weight"))
        fan_in = t.shape.back();
      const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
      std::uniform_real_distribution<double> u(-bound, bound);
      for (float& x : v) x = static_cast<float>(u(rng));
    }
    values.push_back(std::move(v));
  }
  return values;
}

}  // namespace resident::models
