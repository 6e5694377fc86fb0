#include "lib/nn/mlp.h"

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <string>

#include "kernels/core/error.h"
#include "kernels/nn/bias.h"
#include "kernels/nn/bias_activation.h"
#include "kernels/nn/mlp_forward_fused.h"
#include "lib/nn/initializers.h"
#include "lib/nn/linear.h"
#include "lib/nn/linear_lt.h"

namespace resident::nn {

namespace {

// Shared memory up to which nn::Mlp takes the fused forward (the default per-block limit).
constexpr std::size_t kFusedForwardSharedBytes = 48 * 1024;

[[noreturn]] void invalid(const std::string& what, const char* file, int line) {
  throw Error("Mlp", "invalid argument", what, file, line);
}

}  // namespace

const char* to_string(GemmBackend backend) noexcept {
  switch (backend) {
    case GemmBackend::Cublas: return "Cublas";
    case GemmBackend::CublasLt: return "CublasLt";
  }
  return "unknown backend";
}

// The cuBLASLt plans of one batch size. Layer l's input_grad makes dx (l = 0) or the gradient at
// layer l-1's activation: with layer l-1 fused, through its D* epilogue (and input_grad_bgrad the
// same with the bias gradient of layer l-1, for GradMode::Overwrite).
struct Mlp::LtPlans {
  struct Layer {
    std::optional<LinearLtPlan> forward;  // D = a_l when fused, else z_l
    bool fused = false;                   // hidden layer whose activation the epilogues do
    bool bias_in_kernel = false;          // the forward epilogue does not add the bias
    std::optional<LinearLtPlan> weight_grad;        // Default (beta per GradMode)
    std::optional<LinearLtPlan> weight_grad_bgrad;  // top layer with bias: BGradB
    std::optional<LinearLtPlan> input_grad;         // D* (below fused) or Default
    std::optional<LinearLtPlan> input_grad_bgrad;   // below fused, with bias: D*BGrad
  };
  std::vector<Layer> layers;
  std::vector<std::string> fallbacks;  // epilogues cuBLASLt had no split-K-free algorithm for
};

struct Mlp::LtState {
  LtHandle handle;
  std::map<std::size_t, LtPlans> plans;  // by batch
};

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
  if (config_.backend == GemmBackend::CublasLt)
    for (std::size_t l = 0; l + 1 < layers(); ++l)
      if (const auto e = lt_activation_forward(config_.hidden_activation.kind, config_.bias))
        plan.add_bytes(lt_aux_bytes(*e, config_.widths[l + 1], max_batch_));  // aux_l
  if (fused_backward_configured())
    plan.add<float>(kernels::fused_mlp_backward_scratch_floats(config_.widths, max_batch_));
}

bool Mlp::fused_backward_configured() const noexcept {
  return config_.backend == GemmBackend::Cublas && config_.bias &&
         kernels::derivative_from_output_exact(config_.hidden_activation.kind) &&
         kernels::fused_mlp_backward_supports(config_.widths);
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
  aux_.assign(layers(), nullptr);
  if (config_.backend == GemmBackend::CublasLt)
    for (std::size_t l = 0; l + 1 < layers(); ++l)
      if (const auto e = lt_activation_forward(config_.hidden_activation.kind, config_.bias))
        aux_[l] = arena.take_bytes(lt_aux_bytes(*e, config_.widths[l + 1], max_batch_));
  fused_backward_scratch_ = nullptr;
  fused_backward_scratch_floats_ = 0;
  if (fused_backward_configured()) {
    fused_backward_scratch_floats_ =
        kernels::fused_mlp_backward_scratch_floats(config_.widths, max_batch_);
    fused_backward_scratch_ = arena.take<float>(fused_backward_scratch_floats_);
  }
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
  if (config_.backend == GemmBackend::CublasLt) {
    lt_ = std::make_shared<LtState>();
    prepare_batch(max_batch_);
  }
  // The fused forward only where its shared memory fits the default 48 KiB: the DQN Q-network
  // (64-128-128-3, 134 KB opted in) measured slower fused than on the GEMM path (H200:
  // DQN epoch 46.5 vs 44.3 ms; 2 blocks of 32 rows per multiprocessor at most), and ncu cannot
  // replay a graph node that opted in.
  fused_forward_ = config_.backend == GemmBackend::Cublas && config_.bias &&
                   kernels::fused_mlp_forward_supports(config_.widths) &&
                   kernels::fused_mlp_forward_shared_bytes(config_.widths) <=
                       std::min(kFusedForwardSharedBytes,
                                kernels::fused_mlp_forward_shared_limit());
  if (fused_forward_) {
    fused_ = {};
    fused_.layers = static_cast<unsigned>(layers());
    for (std::size_t l = 0; l <= layers(); ++l)
      fused_.widths[l] = static_cast<unsigned>(config_.widths[l]);
    // ReLU / tanh hidden layers keep only a: their backward forms f' from it (same bits).
    backward_from_output_ =
        kernels::derivative_from_output_exact(config_.hidden_activation.kind);
    for (std::size_t l = 0; l < layers(); ++l) {
      const bool hidden = l + 1 < layers();
      fused_.layer[l] = {weights_[l], biases_[l],
                         hidden && backward_from_output_ ? nullptr : pre_activation_[l],
                         activation_[l]};
    }
  }
  fused_backward_ = fused_forward_ && fused_backward_configured();
  fused_grads_ = {};
  if (fused_backward_)
    for (std::size_t l = 0; l < layers(); ++l) {
      fused_grads_.weight[l] = weight_grads_[l];
      fused_grads_.bias[l] = bias_grads_[l];
    }
}

void Mlp::prepare_batch(std::size_t batch) {
  check_batch("Mlp::prepare_batch", batch);
  if (config_.backend != GemmBackend::CublasLt || lt_->plans.count(batch) != 0) return;
  const std::size_t n_layers = layers();
  const bool bias = config_.bias;
  const kernels::ActivationKind kind = config_.hidden_activation.kind;
  const LtHandle& handle = lt_->handle;
  const auto spec = [&](LinearLtProduct product, std::size_t l, LtEpilogue epilogue) {
    LinearLtSpec s;
    s.product = product;
    s.shape = {batch, config_.widths[l], config_.widths[l + 1]};
    s.epilogue = epilogue;
    return s;
  };
  const auto layer_name = [](std::size_t l) { return "layer " + std::to_string(l) + ": "; };
  LtPlans plans;
  plans.layers.resize(n_layers);
  for (std::size_t l = 0; l < n_layers; ++l) {
    LtPlans::Layer& layer = plans.layers[l];
    const bool hidden = l + 1 < n_layers;
    const std::size_t width = config_.widths[l + 1];
    if (hidden && aux_[l] != nullptr) {
      // The activation fuses when both its forward epilogue and the next layer's D* exist.
      LinearLtSpec forward = spec(LinearLtProduct::Forward, l, *lt_activation_forward(kind, bias));
      forward.bias = bias ? biases_[l] : nullptr;
      forward.aux = aux_[l];
      forward.aux_ld = lt_aux_ld(forward.epilogue, width);
      LinearLtSpec derivative =
          spec(LinearLtProduct::InputGrad, l + 1, *lt_activation_backward(kind, false));
      derivative.aux = aux_[l];
      derivative.aux_ld = lt_aux_ld(derivative.epilogue, width);
      std::optional<LinearLtPlan> forward_plan = LinearLtPlan::try_create(handle, forward);
      std::optional<LinearLtPlan> derivative_plan = LinearLtPlan::try_create(handle, derivative);
      if (forward_plan && derivative_plan) {
        layer.fused = true;
        layer.forward = std::move(forward_plan);
        plans.layers[l + 1].input_grad = std::move(derivative_plan);
        if (bias) {
          LinearLtSpec with_bias = derivative;
          with_bias.epilogue = *lt_activation_backward(kind, true);
          with_bias.bias_grad = bias_grads_[l];
          plans.layers[l + 1].input_grad_bgrad = LinearLtPlan::try_create(handle, with_bias);
          if (!plans.layers[l + 1].input_grad_bgrad)
            plans.fallbacks.push_back(layer_name(l + 1) + to_string(with_bias.epilogue) +
                                      " -> " + to_string(derivative.epilogue) + " + bias kernel");
        }
      } else {
        plans.fallbacks.push_back(layer_name(l) + to_string(forward.epilogue) + (forward_plan ? "" : " (none)") +
                                  " / " + to_string(derivative.epilogue) + (derivative_plan ? "" : " (none)") +
                                  " -> activation kernels");
      }
    }
    if (!layer.fused) {
      if (bias) {
        LinearLtSpec with_bias = spec(LinearLtProduct::Forward, l, LtEpilogue::Bias);
        with_bias.bias = biases_[l];
        layer.forward = LinearLtPlan::try_create(handle, with_bias);
        if (!layer.forward) {
          layer.bias_in_kernel = true;
          plans.fallbacks.push_back(layer_name(l) + "Bias -> Default + bias kernel");
        }
      }
      if (!layer.forward)
        layer.forward = LinearLtPlan::create(handle, spec(LinearLtProduct::Forward, l, LtEpilogue::Default));
    }
    layer.weight_grad = LinearLtPlan::create(handle, spec(LinearLtProduct::WeightGrad, l, LtEpilogue::Default));
    if (!hidden && bias) {
      LinearLtSpec bgrad = spec(LinearLtProduct::WeightGrad, l, LtEpilogue::BGradB);
      bgrad.bias_grad = bias_grads_[l];
      layer.weight_grad_bgrad = LinearLtPlan::try_create(handle, bgrad);
      if (!layer.weight_grad_bgrad)
        plans.fallbacks.push_back(layer_name(l) + "BGradB -> Default + bias kernel");
    }
  }
  for (std::size_t l = 0; l < n_layers; ++l)
    if (!plans.layers[l].input_grad)
      plans.layers[l].input_grad =
          LinearLtPlan::create(handle, spec(LinearLtProduct::InputGrad, l, LtEpilogue::Default));
  lt_->plans.emplace(batch, std::move(plans));
}

const Mlp::LtPlans& Mlp::lt_plans(const char* call, std::size_t batch) const {
  const auto found = lt_->plans.find(batch);
  if (found == lt_->plans.end()) {
    std::string prepared;
    for (const auto& [b, unused] : lt_->plans) prepared += (prepared.empty() ? "" : ", ") + std::to_string(b);
    throw Error(call, "no cuBLASLt plan",
                "batch = " + std::to_string(batch) + " was not prepared (prepared: " + prepared +
                    "); call prepare_batch(" + std::to_string(batch) + ") at setup",
                __FILE__, __LINE__);
  }
  return found->second;
}

std::vector<std::string> Mlp::describe_lt_plans(std::size_t batch) const {
  std::vector<std::string> lines;
  if (config_.backend != GemmBackend::CublasLt) return lines;
  if (lt_ == nullptr)
    throw Error("Mlp::describe_lt_plans", "not bound", "call bind(arena) first", __FILE__, __LINE__);
  const LtPlans& plans = lt_plans("Mlp::describe_lt_plans", batch);
  for (std::size_t l = 0; l < plans.layers.size(); ++l) {
    const LtPlans::Layer& layer = plans.layers[l];
    for (const auto* plan : {&layer.forward, &layer.weight_grad, &layer.weight_grad_bgrad,
                             &layer.input_grad, &layer.input_grad_bgrad})
      if (*plan) lines.push_back("layer " + std::to_string(l) + " " + (*plan)->describe());
  }
  for (const std::string& fallback : plans.fallbacks) lines.push_back("fallback " + fallback);
  return lines;
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

const kernels::FusedMlp* Mlp::fused_view(std::size_t batch) const {
  check_batch("Mlp::fused_view", batch);
  return fused_forward_ ? &fused_ : nullptr;
}

const float* Mlp::forward(const StreamContext& context, const float* x, std::size_t batch) {
  check_batch("Mlp::forward", batch);
  if (config_.backend == GemmBackend::CublasLt) {
    forward_lt(context, x, batch);
    return pre_activation_.back();
  }
  if (fused_forward_) {
    kernels::launch_fused_mlp_forward(fused_, x, batch, config_.hidden_activation,
                                      context.stream());
    return pre_activation_.back();
  }
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
  if (config_.backend == GemmBackend::CublasLt) {
    backward_lt(context, x, dy, dx, batch, mode);
    return;
  }
  if (fused_backward_ && dx == nullptr) {
    kernels::launch_fused_mlp_backward(fused_, x, dy, batch, config_.hidden_activation,
                                       fused_grads_, mode, fused_backward_scratch_,
                                       fused_backward_scratch_floats_, context.stream());
    return;
  }
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
      kernels::launch_activation_backward_bias_grad(
          next, bias_grads_[l - 1],
          backward_from_output_ ? activation_[l - 1] : pre_activation_[l - 1], next, batch, width,
          config_.hidden_activation, mode, context.stream(),
          backward_from_output_ ? kernels::SavedActivation::Output
                                : kernels::SavedActivation::PreActivation);
    else
      kernels::launch_activation_backward(next, pre_activation_[l - 1], next, batch * width,
                                          config_.hidden_activation, GradMode::Overwrite,
                                          context.stream());
    dz = next;
    next = next == gradient_a_ ? gradient_b_ : gradient_a_;
  }
}

void Mlp::forward_lt(const StreamContext& context, const float* x, std::size_t batch) {
  const LtPlans& plans = lt_plans("Mlp::forward", batch);
  const cudaStream_t stream = context.stream();
  const float* input = x;
  for (std::size_t l = 0; l < layers(); ++l) {
    const LtPlans::Layer& layer = plans.layers[l];
    const std::size_t width = config_.widths[l + 1];
    if (l + 1 == layers()) {
      layer.forward->run(context, pre_activation_[l], input, weights_[l]);
      if (layer.bias_in_kernel) kernels::launch_add_bias(pre_activation_[l], biases_[l], batch, width, stream);
      break;
    }
    if (layer.fused) {  // a_l = act(x W^T + b), the aux saved for the backward
      layer.forward->run(context, activation_[l], input, weights_[l]);
    } else {            // z_l = x W^T (+ b), then a_l = act(z_l) by the kit's kernel
      layer.forward->run(context, pre_activation_[l], input, weights_[l]);
      if (layer.bias_in_kernel)
        kernels::launch_bias_activation_forward(pre_activation_[l], activation_[l], biases_[l], batch,
                                                width, config_.hidden_activation, stream);
      else
        kernels::launch_activation_forward(activation_[l], pre_activation_[l], batch * width,
                                           config_.hidden_activation, stream);
    }
    input = activation_[l];
  }
}

void Mlp::backward_lt(const StreamContext& context, const float* x, const float* dy, float* dx,
                      std::size_t batch, GradMode mode) {
  const LtPlans& plans = lt_plans("Mlp::backward", batch);
  const cudaStream_t stream = context.stream();
  const bool overwrite = mode == GradMode::Overwrite;
  const float* dz = dy;
  float* next = gradient_a_;
  for (std::size_t l = layers(); l-- > 0;) {
    const LtPlans::Layer& layer = plans.layers[l];
    const float* input = l == 0 ? x : activation_[l - 1];
    if (layer.weight_grad_bgrad && overwrite) {  // dW and (top layer) db in one GEMM
      layer.weight_grad_bgrad->run(context, weight_grads_[l], dz, input);
    } else {
      layer.weight_grad->run(context, weight_grads_[l], dz, input, mode);
      if (l + 1 == layers() && config_.bias)
        kernels::launch_bias_grad(bias_grads_[l], dz, batch, config_.widths[l + 1], mode, stream);
    }
    if (l == 0) {
      if (dx != nullptr) layer.input_grad->run(context, dx, dz, weights_[0]);
      return;
    }
    // dz_{l-1} into `next`: by the D* epilogue when layer l-1 is fused (with its bias gradient
    // by D*BGrad when overwriting), else da_{l-1} = dz W_l and the kit's activation backward.
    const std::size_t width = config_.widths[l];
    if (plans.layers[l - 1].fused) {
      if (layer.input_grad_bgrad && overwrite) {
        layer.input_grad_bgrad->run(context, next, dz, weights_[l]);
      } else {
        layer.input_grad->run(context, next, dz, weights_[l]);
        if (config_.bias) kernels::launch_bias_grad(bias_grads_[l - 1], next, batch, width, mode, stream);
      }
    } else {
      layer.input_grad->run(context, next, dz, weights_[l]);
      if (config_.bias)
        kernels::launch_activation_backward_bias_grad(next, bias_grads_[l - 1], pre_activation_[l - 1],
                                                      next, batch, width, config_.hidden_activation,
                                                      mode, stream);
      else
        kernels::launch_activation_backward(next, pre_activation_[l - 1], next, batch * width,
                                            config_.hidden_activation, GradMode::Overwrite, stream);
    }
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
