#include "lib/models/xlstm/xlstm_config.h"

#include <climits>
#include <cmath>
#include <random>

#include "kernels/core/error.h"
#include "kernels/models/xlstm/mlstm_cell.h"
#include "kernels/models/xlstm/slstm_recurrence.h"

namespace resident::models {

namespace {

[[noreturn]] void invalid(const std::string& detail, int line) {
  throw Error("XlstmConfig", "invalid config", detail, __FILE__, line);
}

void require_range(const char* field, std::size_t value, std::size_t low, std::size_t high,
                   int line) {
  if (value < low || value > high)
    invalid(std::string(field) + " = " + std::to_string(value) + ", allowed [" +
                std::to_string(low) + ", " + std::to_string(high) + "]",
            line);
}

bool is_slstm(const XlstmConfig& c, std::size_t block) {
  return static_cast<long>(block) == c.slstm_at;
}

}  // namespace

void validate_xlstm_config(const XlstmConfig& config, const ModelShape& shape) {
  constexpr std::size_t kInt = static_cast<std::size_t>(INT_MAX);
  require_range("shape.window", shape.window, 1, kInt, __LINE__);
  require_range("shape.features", shape.features, 1, kInt, __LINE__);
  require_range("shape.outputs", shape.outputs, 1, kInt, __LINE__);
  require_range("shape.max_batch", shape.max_batch, 1, kInt, __LINE__);
  require_range("d_model", config.d_model, 1, 4096, __LINE__);
  require_range("heads", config.heads, 1, 64, __LINE__);
  require_range("blocks", config.blocks, 1, 64, __LINE__);
  require_range("conv_kernel", config.conv_kernel, 1, 8, __LINE__);
  if (config.slstm_at < -1 || config.slstm_at >= static_cast<long>(config.blocks))
    invalid("slstm_at = " + std::to_string(config.slstm_at) + ", allowed [-1, " +
                std::to_string(config.blocks - 1) + "]",
            __LINE__);
  if (!(config.cell_eps >= 0.0f) || !std::isfinite(config.cell_eps))
    invalid("cell_eps = " + std::to_string(config.cell_eps) + ", allowed finite >= 0", __LINE__);
  if (config.d_model % config.heads != 0)
    invalid("d_model = " + std::to_string(config.d_model) + ", allowed a multiple of heads = " +
                std::to_string(config.heads),
            __LINE__);
  if (config.inner() % config.heads != 0)
    invalid("heads = " + std::to_string(config.heads) + ", allowed a divisor of the inner width " +
                std::to_string(config.inner()),
            __LINE__);
  if (config.slstm_at >= 0 &&
      config.slstm_head_dim() > static_cast<std::size_t>(kernels::xlstm::kSlstmMaxHeadDim))
    invalid("d_model / heads = " + std::to_string(config.slstm_head_dim()) +
                " (the sLSTM head dim), allowed [1, " +
                std::to_string(kernels::xlstm::kSlstmMaxHeadDim) + "]",
            __LINE__);
  if (shape.window > 4096)
    invalid("shape.window = " + std::to_string(shape.window) + ", allowed [1, 4096]", __LINE__);
  const std::size_t cell = kernels::xlstm::mlstm_cell_backward_shared_bytes(
      static_cast<int>(shape.window), static_cast<int>(config.mlstm_head_dim()));
  if (cell > kXlstmMaxCellSharedBytes)
    invalid("shape.window = " + std::to_string(shape.window) + " with mLSTM head dim " +
                std::to_string(config.mlstm_head_dim()) + ": the cell needs " +
                std::to_string(cell) + " bytes of shared memory per (sample, head), allowed <= " +
                std::to_string(kXlstmMaxCellSharedBytes) + " (one chunk holds the window)",
            __LINE__);
  if (shape.max_batch > kInt / shape.window ||
      shape.max_batch * shape.window > kInt / (3 * config.inner() + 4 * config.d_model))
    invalid("shape.max_batch = " + std::to_string(shape.max_batch) + " with shape.window = " +
                std::to_string(shape.window) + ": the GEMMs' sizes exceed " +
                std::to_string(INT_MAX),
            __LINE__);
}

std::string describe_xlstm(const XlstmConfig& c) {
  std::string text = "xlstm D=" + std::to_string(c.d_model) + " NH=" + std::to_string(c.heads) +
                     " Di=" + std::to_string(c.inner()) + " blocks " + std::to_string(c.blocks);
  text += c.slstm_at >= 0 ? " (sLSTM at " + std::to_string(c.slstm_at) + ")" : " (mLSTM only)";
  return text + " FFN " + std::to_string(c.ffn());
}

std::vector<XlstmTensorSpec> xlstm_tensor_specs(const XlstmConfig& c, const ModelShape& shape) {
  const std::size_t D = c.d_model, Di = c.inner(), NH = c.heads, DHs = c.slstm_head_dim();
  const std::size_t K = c.conv_kernel;
  std::vector<XlstmTensorSpec> s = {{"embed.weight", {D, shape.features}, true},
                                    {"embed.bias", {D}, false}};
  for (std::size_t b = 0; b < c.blocks; ++b) {
    const std::string pre = "block" + std::to_string(b) + ".";
    std::vector<XlstmTensorSpec> block;
    if (is_slstm(c, b))
      block = {{"norm.weight", {D}, false},
               {"conv.weight", {D, K}, false},
               {"conv.bias", {D}, false},
               {"w.weight", {4, NH, DHs, DHs}, true},
               {"r.weight", {4, NH, DHs, DHs}, true},
               {"bias", {4, D}, false},
               {"outnorm.weight", {D}, false},
               {"ffn_norm.weight", {D}, false},
               {"ffn_up.weight", {2 * c.ffn(), D}, true},
               {"ffn_down.weight", {D, c.ffn()}, true}};
    else
      block = {{"norm.weight", {D}, false},
               {"up.weight", {2 * Di, D}, true},
               {"conv.weight", {Di, K}, false},
               {"conv.bias", {Di}, false},
               {"q.weight", {Di / 4, 4, 4}, true},
               {"k.weight", {Di / 4, 4, 4}, true},
               {"v.weight", {Di / 4, 4, 4}, true},
               {"gate.weight", {2 * NH, 3 * Di}, true},
               {"gate.bias", {2 * NH}, false},
               {"outnorm.weight", {Di}, false},
               {"skip", {Di}, false},
               {"down.weight", {D, Di}, true}};
    for (XlstmTensorSpec& t : block) s.push_back({pre + t.name, t.shape, t.decay});
  }
  s.push_back({"post_norm.weight", {D}, false});
  s.push_back({"readout.weight", {shape.outputs, D}, true});
  s.push_back({"readout.bias", {shape.outputs}, false});
  return s;
}

std::vector<std::vector<float>> xlstm_initial_values(const XlstmConfig& c,
                                                     const ModelShape& shape,
                                                     std::uint64_t seed) {
  validate_xlstm_config(c, shape);
  std::mt19937_64 rng(seed);
  const double D = static_cast<double>(c.d_model);
  const double small = std::sqrt(2.0 / (5.0 * D));
  const double wang = 2.0 / (static_cast<double>(c.blocks) * std::sqrt(D));
  auto uniform = [&](std::size_t n, double bound) {
    std::uniform_real_distribution<double> u(-bound, bound);
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(u(rng));
    return v;
  };
  auto normal = [&](std::size_t n, double stddev) {
    std::normal_distribution<double> d(0.0, stddev);
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(d(rng));
    return v;
  };
  auto ends = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  const double conv_bound = 1.0 / std::sqrt(static_cast<double>(c.conv_kernel));
  std::vector<std::vector<float>> values;
  for (const XlstmTensorSpec& t : xlstm_tensor_specs(c, shape)) {
    std::size_t n = 1;
    for (const std::size_t e : t.shape) n *= e;
    const std::size_t block = t.name.rfind("block", 0) == 0 ? std::stoul(t.name.substr(5)) : 0;
    if (t.name == "embed.weight" || t.name == "embed.bias") {
      values.push_back(uniform(n, 1.0 / std::sqrt(static_cast<double>(shape.features))));
    } else if (t.name == "readout.weight" || t.name == "readout.bias") {
      values.push_back(uniform(n, 1.0 / std::sqrt(D)));
    } else if (ends(t.name, "norm.weight") || ends(t.name, "skip")) {
      values.emplace_back(n, 1.0f);
    } else if (ends(t.name, "conv.weight") || ends(t.name, "conv.bias")) {
      values.push_back(uniform(n, conv_bound));
    } else if (ends(t.name, "down.weight")) {
      values.push_back(normal(n, wang));
    } else if (ends(t.name, "gate.weight") || ends(t.name, "r.weight")) {
      values.emplace_back(n, 0.0f);
    } else if (ends(t.name, "gate.bias")) {
      const std::size_t NH = c.heads;
      std::vector<float> v = normal(NH, 0.1);
      for (std::size_t h = 0; h < NH; ++h)
        v.push_back(static_cast<float>(NH == 1 ? 3.0 : 3.0 + 3.0 * static_cast<double>(h) /
                                                                 static_cast<double>(NH - 1)));
      values.push_back(std::move(v));
    } else if (ends(t.name, ".bias")) {  // the sLSTM's [4, D]
      const std::size_t Dm = c.d_model, DHs = c.slstm_head_dim();
      const double ratio = c.blocks == 1 ? 0.0
                                         : static_cast<double>(block) /
                                               static_cast<double>(c.blocks - 1);
      std::vector<float> v(4 * Dm, 0.0f);
      for (std::size_t u = 0; u < Dm; ++u) {
        const double j = static_cast<double>(u % DHs);
        const double frac = DHs == 1 ? 0.0 : j / static_cast<double>(DHs - 1);
        v[Dm + u] = static_cast<float>(5.0 - 12.0 * std::pow(frac, 0.3 + 1.3 * ratio));
      }
      values.push_back(std::move(v));
    } else {  // up, q, k, v, w, ffn_up
      values.push_back(normal(n, small));
    }
  }
  return values;
}

}  // namespace resident::models
