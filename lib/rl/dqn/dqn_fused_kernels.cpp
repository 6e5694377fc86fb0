#include "lib/rl/dqn/dqn_fused_kernels.h"

#include <string>

#include "kernels/core/error.h"
#include "lib/nn/regression_step.h"

namespace resident::dqn {

namespace kd = kernels::dqn;

DqnFusedKernels::DqnFusedKernels(const DqnConfig& config, const QNetwork& online,
                                 nn::ParamSlab& online_slab, nn::ParamSlab& target_slab,
                                 std::size_t env_count, std::size_t batch, cudaStream_t stream)
    : env_count_(env_count), batch_(batch) {
  if (!config.fused_train_step && !config.fused_acting) return;
  const std::vector<std::size_t> widths = fusable_widths(config, online);
  if (widths.empty()) return;
  set_up_online_views(widths, online, online_slab);
  if (config.fused_train_step)
    set_up_train_step(widths, config, online, online_slab, target_slab, stream);
  if (config.fused_acting) set_up_acting(widths, online);
}

std::vector<std::size_t> DqnFusedKernels::fusable_widths(const DqnConfig& config,
                                                         const QNetwork& online) {
  std::vector<std::size_t> widths{online.observation_size()};
  widths.insert(widths.end(), config.hidden.begin(), config.hidden.end());
  widths.push_back(online.action_count());
  const nn::MlpConfig& mc = online.mlp().config();
  // TF32 (allow_tf32) is the GEMM path's: the fused kernels compute in fp32 only.
  if (config.dueling || config.allow_tf32 || !mc.bias || mc.backend != nn::GemmBackend::Cublas ||
      !kernels::fused_step_supports(widths))
    return {};
  if (!kernels::fused_step_device_ok()) return {};
  return widths;
}

void DqnFusedKernels::set_up_online_views(const std::vector<std::size_t>& widths,
                                          const QNetwork& online, nn::ParamSlab& online_slab) {
  const nn::MlpConfig& mc = online.mlp().config();
  const std::size_t layers = widths.size() - 1;
  online_.layers = layers;
  online_.hidden_activation = mc.hidden_activation;
  for (std::size_t l = 0; l <= layers; ++l) online_.widths[l] = widths[l];
  for (std::size_t l = 0; l < layers; ++l) {
    const std::string weight = online.mlp().weight_name(l), bias = online.mlp().bias_name(l);
    online_.weights[l] = online_slab.param(weight);
    online_.biases[l] = online_slab.param(bias);
    online_.weight_grads[l] = online_slab.grad(weight);
    online_.bias_grads[l] = online_slab.grad(bias);
  }
}

void DqnFusedKernels::set_up_train_step(const std::vector<std::size_t>& widths,
                                        const DqnConfig& config, const QNetwork& online,
                                        nn::ParamSlab& online_slab, nn::ParamSlab& target_slab,
                                        cudaStream_t stream) {
  const std::size_t b = batch_;
  if (b > nn::kFusedStepMaxBatch) return;
  const nn::MlpConfig& mc = online.mlp().config();
  const std::size_t layers = widths.size() - 1;
  target_.network.layers = layers;
  target_.network.hidden_activation = mc.hidden_activation;
  for (std::size_t l = 0; l <= layers; ++l) target_.network.widths[l] = widths[l];
  for (std::size_t l = 0; l < layers; ++l) {
    const std::string weight = online.mlp().weight_name(l), bias = online.mlp().bias_name(l);
    target_.network.weights[l] = target_slab.param(weight);
    target_.network.biases[l] = target_slab.param(bias);
    online_scratch_.d_pre_activations[l] = scratch(b * widths[l + 1]);
    if (l + 1 < layers) {  // hidden: z and a of [states; next_states] and of the next states
      online_scratch_.pre_activations[l] = scratch(2 * b * widths[l + 1]);
      online_scratch_.activations[l] = scratch(2 * b * widths[l + 1]);
      target_.scratch.pre_activations[l] = scratch(b * widths[l + 1]);
      target_.scratch.activations[l] = scratch(b * widths[l + 1]);
    }
  }
  online_scratch_.loss_partials = scratch(kd::dqn_fused_step_loss_partials(b));
  const unsigned grid = kd::dqn_fused_step_grid(widths, b, mc.hidden_activation);
  norm_partials_ = DeviceBuffer<double>(grid);
  online_scratch_.norm_partials = norm_partials_.data();
  // Split-K of the last backward phase: its counters start at zero and every step leaves them so.
  online_scratch_.split_partials = scratch(kernels::fused_step_split_partials(widths));
  split_counters_ = DeviceBuffer<std::uint32_t>(kernels::fused_step_split_tiles(widths));
  RESIDENT_CUDA_CHECK(
      cudaMemsetAsync(split_counters_.data(), 0, split_counters_.bytes(), stream));
  online_scratch_.split_counters = split_counters_.data();
  target_.params = target_slab.params();
  target_.tau = static_cast<float>(config.tau);
  target_.period = config.target_update_period;
  const nn::ParamSlab::OptimizerViews views = online_slab.optimizer_views();
  optimizer_ = {.params = views.params, .m = views.m, .v = views.v, .grads = views.grads,
                .decay_mask = views.decay_mask, .n = views.n, .step = views.step,
                .norm = views.grad_norm, .grad_scale = views.clip_scale,
                .max_norm = static_cast<float>(config.max_grad_norm),
                .constants = nn::adamw_constants(config.adamw, "DqnTrainer")};
  step_grid_ = grid;
}

void DqnFusedKernels::set_up_acting(const std::vector<std::size_t>& widths,
                                    const QNetwork& online) {
  const std::size_t layers = widths.size() - 1;
  for (std::size_t l = 0; l + 1 < layers; ++l) {  // hidden z and a of the N observations
    act_scratch_.pre_activations[l] = scratch(env_count_ * widths[l + 1]);
    act_scratch_.activations[l] = scratch(env_count_ * widths[l + 1]);
  }
  act_q_ = DeviceBuffer<float>(env_count_ * widths.back());
  act_grid_ = kd::dqn_act_fused_grid(widths, env_count_, online.mlp().config().hidden_activation);
}

void DqnFusedKernels::act(std::int32_t* actions, const float* observations,
                          const kd::DqnActExploration& exploration, cudaStream_t stream) {
  kd::launch_dqn_act_fused(actions, act_q_.data(), online_, act_scratch_, observations,
                           env_count_, exploration, act_grid_, stream);
}

void DqnFusedKernels::train(const kd::DqnFusedOutputs& out, const kd::DqnFusedBatch& rows,
                            const kd::DqnFusedConstants& constants, cudaStream_t stream) {
  kd::launch_dqn_train_step_fused(out, online_, online_scratch_, target_, optimizer_, rows, batch_,
                                  constants, step_grid_, stream);
}

}  // namespace resident::dqn
