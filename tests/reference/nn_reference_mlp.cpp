// MLP composite: Linear + activation per layer over one flat parameter vector.
#include <string>
#include <utility>

#include "tests/reference/nn_reference.h"
#include "tests/reference/nn_reference_checks.h"

namespace resident::reference {

using detail::require;
using detail::require_size;
using detail::require_size_or_empty;

namespace {

std::size_t layer_parameter_count(const MlpLayer& layer) {
  return layer.out_features * layer.in_features + (layer.bias ? layer.out_features : 0);
}

// Views of one layer's weight and bias (empty without a bias) inside the parameter vector.
template <typename T>
struct LayerParams {
  std::span<T> weight;
  std::span<T> bias;
};

template <typename T>
LayerParams<T> layer_params(const MlpLayer& layer, std::span<T> params, std::size_t offset) {
  const std::size_t weight_size = layer.out_features * layer.in_features;
  return {params.subspan(offset, weight_size),
          layer.bias ? params.subspan(offset + weight_size, layer.out_features) : std::span<T>{}};
}

void require_mlp_args(const char* op, std::span<const MlpLayer> layers, std::size_t batch,
                      std::span<const double> params, std::span<const double> x) {
  require(!layers.empty(), op, "an MLP needs at least one layer");
  for (std::size_t l = 1; l < layers.size(); ++l) {
    require(layers[l].in_features == layers[l - 1].out_features, op,
            "layer " + std::to_string(l) + " takes " + std::to_string(layers[l].in_features) +
                " features, layer " + std::to_string(l - 1) + " gives " +
                std::to_string(layers[l - 1].out_features));
  }
  require_size(op, "params", params.size(), mlp_parameter_count(layers));
  require_size(op, "x", x.size(), batch * layers.front().in_features);
}

LinearShape linear_shape(const MlpLayer& layer, std::size_t batch) {
  return {batch, layer.in_features, layer.out_features};
}

// What the backward needs from the forward, per layer: its input and its pre-activation.
struct MlpTrace {
  std::vector<std::vector<double>> inputs;
  std::vector<std::vector<double>> pre_activations;
  std::vector<double> output;
};

MlpTrace trace_forward(std::span<const MlpLayer> layers, std::size_t batch,
                       std::span<const double> params, std::span<const double> x) {
  MlpTrace trace;
  std::vector<double> h(x.begin(), x.end());
  std::size_t offset = 0;
  for (const MlpLayer& layer : layers) {
    const auto p = layer_params(layer, params, offset);
    std::vector<double> pre = linear_forward(linear_shape(layer, batch), h, p.weight, p.bias);
    std::vector<double> post = activation_forward(layer.activation, pre);
    trace.inputs.push_back(std::move(h));
    trace.pre_activations.push_back(std::move(pre));
    h = std::move(post);
    offset += layer_parameter_count(layer);
  }
  trace.output = std::move(h);
  return trace;
}

}  // namespace

std::size_t mlp_parameter_count(std::span<const MlpLayer> layers) {
  std::size_t count = 0;
  for (const MlpLayer& layer : layers) count += layer_parameter_count(layer);
  return count;
}

std::vector<double> mlp_forward(std::span<const MlpLayer> layers, std::size_t batch,
                                std::span<const double> params, std::span<const double> x) {
  require_mlp_args("mlp_forward", layers, batch, params, x);
  return trace_forward(layers, batch, params, x).output;
}

// Walks the layers backward. Each parameter and each element of dx receives exactly one
// contribution, written with `mode`; the gradients between layers are temporaries.
void mlp_backward(std::span<const MlpLayer> layers, std::size_t batch,
                  std::span<const double> params, std::span<const double> x,
                  std::span<const double> dy, const MlpGrads& grads, GradMode mode) {
  constexpr const char* kOp = "mlp_backward";
  require_mlp_args(kOp, layers, batch, params, x);
  require_size(kOp, "dy", dy.size(), batch * layers.back().out_features);
  require_size_or_empty(kOp, "dx", grads.dx.size(), x.size());
  require_size_or_empty(kOp, "dparams", grads.dparams.size(), params.size());
  const MlpTrace trace = trace_forward(layers, batch, params, x);
  std::vector<double> d_output(dy.begin(), dy.end());
  std::size_t offset = params.size();
  for (std::size_t l = layers.size(); l-- > 0;) {
    const MlpLayer& layer = layers[l];
    offset -= layer_parameter_count(layer);
    std::vector<double> d_pre(d_output.size());
    activation_backward(layer.activation, trace.pre_activations[l], d_output, d_pre,
                        GradMode::Overwrite);
    const auto p = layer_params(layer, params, offset);
    const LinearShape shape = linear_shape(layer, batch);
    if (!grads.dparams.empty()) {
      const auto dp = layer_params(layer, grads.dparams, offset);
      linear_backward(shape, trace.inputs[l], p.weight, d_pre, {{}, dp.weight, dp.bias}, mode);
    }
    std::vector<double> d_input;
    if (l > 0) {
      d_input.resize(trace.inputs[l].size());
      linear_backward(shape, trace.inputs[l], p.weight, d_pre, {d_input, {}, {}},
                      GradMode::Overwrite);
    } else if (!grads.dx.empty()) {
      linear_backward(shape, trace.inputs[l], p.weight, d_pre, {grads.dx, {}, {}}, mode);
    }
    d_output = std::move(d_input);
  }
}

}  // namespace resident::reference
