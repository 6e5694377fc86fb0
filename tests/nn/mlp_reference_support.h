// An nn::Mlp seen by the double-precision reference (tests/reference): its layers, a slab part in
// the reference's flat parameter layout, and the synthetic regression both MLP training tests
// learn, trained the same way in double on the CPU. Shared by mlp_test and linear_lt_test.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/nn/activation.h"
#include "lib/core/scratch_arena.h"
#include "lib/core/stream.h"
#include "lib/nn/mlp.h"
#include "lib/nn/param_slab.h"
#include "lib/nn/regression_step.h"
#include "tests/nn/nn_test_support.h"
#include "tests/reference/nn_reference.h"

namespace resident::test::mlp_reference {

inline reference::ActivationKind reference_kind(kernels::ActivationKind kind) {
  switch (kind) {
    case kernels::ActivationKind::Relu: return reference::ActivationKind::Relu;
    case kernels::ActivationKind::Tanh: return reference::ActivationKind::Tanh;
    case kernels::ActivationKind::Sigmoid: return reference::ActivationKind::Sigmoid;
    case kernels::ActivationKind::Silu: return reference::ActivationKind::Silu;
    case kernels::ActivationKind::GeluTanh: return reference::ActivationKind::GeluTanh;
    case kernels::ActivationKind::Elu: return reference::ActivationKind::Elu;
    case kernels::ActivationKind::Softplus: return reference::ActivationKind::Softplus;
  }
  return reference::ActivationKind::Identity;
}

// The reference layers of an Mlp: its hidden activation, an identity output layer.
inline std::vector<reference::MlpLayer> reference_layers(const nn::Mlp& mlp) {
  std::vector<reference::MlpLayer> layers;
  const auto& w = mlp.config().widths;
  for (std::size_t l = 0; l + 1 < w.size(); ++l) {
    reference::Activation activation;
    activation.kind = l + 2 < w.size() ? reference_kind(mlp.config().hidden_activation.kind)
                                       : reference::ActivationKind::Identity;
    layers.push_back({w[l], w[l + 1], mlp.config().bias, activation});
  }
  return layers;
}

// A whole slab part (as downloaded) in the reference's flat layout: per layer the weight, then
// the bias.
inline std::vector<double> flat(const nn::Mlp& mlp, const std::vector<float>& all,
                                const nn::ParamSlab& slab) {
  std::vector<double> out;
  for (std::size_t l = 0; l < mlp.layers(); ++l) {
    for (const std::string& name : {mlp.weight_name(l), mlp.bias_name(l)}) {
      if (!mlp.config().bias && name == mlp.bias_name(l)) continue;
      const nn::SlabTensor& t = slab.layout().tensor(name);
      out.insert(out.end(), all.begin() + static_cast<std::ptrdiff_t>(t.offset),
                 all.begin() + static_cast<std::ptrdiff_t>(t.offset + t.size));
    }
  }
  return out;
}

// An Mlp over its own slab and arena on its own stream, parameters initialized from `seed`.
struct MlpRig {
  StreamContext context;
  nn::ParamSlab slab;
  nn::Mlp mlp;
  std::unique_ptr<ScratchArena> arena;

  MlpRig(std::vector<std::size_t> widths, std::size_t max_batch, std::uint64_t seed)
      : MlpRig(nn::MlpConfig{.widths = std::move(widths)}, max_batch, seed) {}
  MlpRig(nn::MlpConfig config, std::size_t max_batch, std::uint64_t seed)
      : mlp(std::move(config), max_batch, slab) {
    slab.finalize();
    ScratchPlan plan;
    mlp.plan(plan);
    arena = std::make_unique<ScratchArena>(plan.bytes());
    mlp.bind(*arena);
    mlp.init_parameters(seed, context.stream());
    context.synchronize();
  }
};

// Synthetic regression: target = (sin(x0) + x1 x2, x3^2) on x uniform in [-1, 1]^4.
struct RegressionData {
  std::vector<float> x, target;
  RegressionData(std::size_t batch, std::mt19937_64& rng)
      : x(nn_support::random_floats(batch * 4, -1.0f, 1.0f, rng)) {
    for (std::size_t r = 0; r < batch; ++r) {
      const float* xr = &x[r * 4];
      target.push_back(std::sin(xr[0]) + xr[1] * xr[2]);
      target.push_back(xr[3] * xr[3]);
    }
  }
};

// The same training as RegressionStep (MSE, clip, AdamW without decay) in double on the CPU
// from `params`: returns the loss of the last step.
inline double reference_training(const nn::Mlp& mlp, std::vector<double> params,
                                 const RegressionData& data, std::size_t batch,
                                 const nn::RegressionStepConfig& config, int steps) {
  const auto layers = reference_layers(mlp);
  const std::vector<double> x = nn_support::to_double(data.x);
  const std::vector<double> target = nn_support::to_double(data.target);
  std::vector<double> m(params.size(), 0.0), v(params.size(), 0.0), grads(params.size());
  const std::vector<std::uint8_t> no_decay(params.size(), 0);
  const reference::AdamWConfig adamw{config.adamw.lr, config.adamw.beta1, config.adamw.beta2,
                                     config.adamw.eps, 0.0};
  double loss = 0;
  for (int step = 1; step <= steps; ++step) {
    const std::vector<double> y = reference::mlp_forward(layers, batch, params, x);
    loss = reference::mse_loss(y, target);
    std::vector<double> dy(y.size());
    reference::mse_loss_backward(y, target, 1.0, dy, reference::GradMode::Overwrite);
    std::vector<double> unused_dx(x.size());
    reference::mlp_backward(layers, batch, params, x, dy, {unused_dx, grads},
                            reference::GradMode::Overwrite);
    reference::clip_global_norm(grads, config.max_grad_norm);
    reference::adamw_step(adamw, static_cast<std::uint64_t>(step), params, grads, m, v, no_decay);
  }
  return loss;
}

}  // namespace resident::test::mlp_reference
