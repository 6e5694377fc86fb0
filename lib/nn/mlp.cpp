#include "lib/nn/mlp.h"

#include <algorithm>
#include <random>
#include <string>

#include "lib/core/error.h"
#include "kernels/nn/bias.h"
#include "kernels/nn/bias_activation.h"
#include "lib/nn/initializers.h"
#include "lib/nn/linear.h"

namespace resident::nn {

namespace {

[[noreturn]] void invalid(const std::string& what, const char* file, int line) {
  throw Error("Mlp", "invalid argument", what, file, line);
}

}  // namespace

Mlp::Mlp(MlpConfig config, std::size_t max_batch, ParamSlab& slab)
    : config_(std::move(config)), max_batch_(max_batch), slab_(&slab) {
  if (config_.widths.size() < 2)
    invalid("widths has " + std::to_string(config_.widths.size()) +
                " entries, allowed >= 2 ({in, ..., out})",
            __FILE__, __LINE__);
  for (std::size_t i = 0; i < config_.widths.size(); ++i)
    if (config_.widths[i] == 0)
      invalid("widths[" + std::to_string(i) + "] = 0, allowed >= 1", __FILE__, __LINE__);
  if (max_batch_ == 0) invalid("max_batch = 0, allowed >= 1", __FILE__, __LINE__);
  validate_initializer(config_.weight_init);  // throws naming the initializer's field
  max_width_ = *std::max_element(config_.widths.begin(), config_.widths.end());
  for (std::size_t l = 0; l < layers(); ++l) {
    slab.add(weight_name(l), {config_.widths[l + 1], config_.widths[l]}, /*decay=*/true);
    if (config_.bias) slab.add(bias_name(l), {config_.widths[l + 1]}, /*decay=*/false);
  }
}

std::string Mlp::weight_name(std::size_t layer) const {
  return config_.name + "." + std::to_string(layer) + ".weight";
}

std::string Mlp::bias_name(std::size_t layer) const {
  return config_.name + "." + std::to_string(layer) + ".bias";
}

void Mlp::plan(ScratchPlan& plan) const {
  for (std::size_t l = 0; l < layers(); ++l) {
    plan.add<float>(max_batch_ * config_.widths[l + 1]);                      // z_l
    if (l + 1 < layers()) plan.add<float>(max_batch_ * config_.widths[l + 1]);  // a_l
  }
  plan.add<float>(max_batch_ * max_width_).add<float>(max_batch_ * max_width_);
}

void Mlp::bind(ScratchArena& arena) {
  pre_activation_.assign(layers(), nullptr);
  activation_.assign(layers(), nullptr);
  for (std::size_t l = 0; l < layers(); ++l) {
    pre_activation_[l] = arena.take<float>(max_batch_ * config_.widths[l + 1]);
    if (l + 1 < layers()) activation_[l] = arena.take<float>(max_batch_ * config_.widths[l + 1]);
  }
  gradient_a_ = arena.take<float>(max_batch_ * max_width_);
  gradient_b_ = arena.take<float>(max_batch_ * max_width_);
  weights_.assign(layers(), nullptr);
  weight_grads_.assign(layers(), nullptr);
  biases_.assign(layers(), nullptr);
  bias_grads_.assign(layers(), nullptr);
  for (std::size_t l = 0; l < layers(); ++l) {
    weights_[l] = slab_->param(weight_name(l));
    weight_grads_[l] = slab_->grad(weight_name(l));
    if (config_.bias) {
      biases_[l] = slab_->param(bias_name(l));
      bias_grads_[l] = slab_->grad(bias_name(l));
    }
  }
}

void Mlp::init_parameters(std::uint64_t seed, cudaStream_t stream) {
  std::mt19937_64 rng(seed);
  for (std::size_t l = 0; l < layers(); ++l) {
    upload_initial_values(*slab_, weight_name(l), config_.weight_init, rng, stream);
    if (config_.bias)
      slab_->upload(SlabPart::Params, bias_name(l),
                    std::vector<float>(config_.widths[l + 1], 0.0f), stream);
  }
}

void Mlp::check_batch(const char* call, std::size_t batch) const {
  if (batch == 0 || batch > max_batch_)
    throw Error(call, "invalid argument",
                "batch = " + std::to_string(batch) + ", allowed [1, " + std::to_string(max_batch_) +
                    "] (max_batch)",
                __FILE__, __LINE__);
  if (gradient_a_ == nullptr)
    throw Error(call, "not bound", "call bind(arena) after the slab is finalized", __FILE__, __LINE__);
}

const float* Mlp::forward(const StreamContext& context, const float* x, std::size_t batch) {
  check_batch("Mlp::forward", batch);
  const float* input = x;
  for (std::size_t l = 0; l < layers(); ++l) {
    const LinearShape shape{batch, config_.widths[l], config_.widths[l + 1]};
    const bool hidden = l + 1 < layers();
    // A hidden layer's bias is added by the fused bias-activation kernel below.
    linear_forward(context, shape, pre_activation_[l], input, weights_[l],
                   hidden ? nullptr : biases_[l]);
    if (!hidden) break;
    if (config_.bias)
      kernels::launch_bias_activation_forward(pre_activation_[l], activation_[l], biases_[l], batch,
                                              config_.widths[l + 1], config_.hidden_activation,
                                              context.stream());
    else
      kernels::launch_activation_forward(activation_[l], pre_activation_[l],
                                         batch * config_.widths[l + 1], config_.hidden_activation,
                                         context.stream());
    input = activation_[l];
  }
  return pre_activation_.back();
}

void Mlp::backward(const StreamContext& context, const float* x, const float* dy, float* dx,
                   std::size_t batch, GradMode mode) {
  check_batch("Mlp::backward", batch);
  // dz: the gradient at the current layer's pre-activation; starts as dy (the last layer has no
  // activation). Ping-pong between the two scratch buffers for the layers below. Layer l's bias
  // gradient comes from its dz: the last layer's from dy (Linear's bias kernel), a hidden
  // layer's from the fused activation backward that makes its dz.
  const float* dz = dy;
  float* next = gradient_a_;
  for (std::size_t l = layers(); l-- > 0;) {
    const LinearShape shape{batch, config_.widths[l], config_.widths[l + 1]};
    const float* input = l == 0 ? x : activation_[l - 1];
    const bool top = l + 1 == layers();
    linear_backward(context, shape, {nullptr, weight_grads_[l], top ? bias_grads_[l] : nullptr},
                    input, weights_[l], dz, mode);
    if (l == 0) {
      if (dx != nullptr) linear_backward(context, shape, {dx, nullptr, nullptr}, input, weights_[l],
                                         dz, GradMode::Overwrite);
      return;
    }
    // da_{l-1} = dz W_l into `next`, then dz_{l-1} = act'(z_{l-1}) * da_{l-1} in place (with
    // layer l-1's bias gradient from the same pass).
    linear_backward(context, shape, {next, nullptr, nullptr}, input, weights_[l], dz,
                    GradMode::Overwrite);
    const std::size_t width = config_.widths[l];
    if (config_.bias)
      kernels::launch_activation_backward_bias_grad(next, bias_grads_[l - 1], pre_activation_[l - 1],
                                                    next, batch, width, config_.hidden_activation,
                                                    mode, context.stream());
    else
      kernels::launch_activation_backward(next, pre_activation_[l - 1], next, batch * width,
                                          config_.hidden_activation, GradMode::Overwrite,
                                          context.stream());
    dz = next;
    next = next == gradient_a_ ? gradient_b_ : gradient_a_;
  }
}

double Mlp::train_flops(std::size_t batch) const {
  double flops = 0;
  for (std::size_t l = 0; l < layers(); ++l)
    flops += 3.0 * 2.0 * static_cast<double>(batch) * static_cast<double>(config_.widths[l]) *
             static_cast<double>(config_.widths[l + 1]);
  return flops;
}

}  // namespace resident::nn
