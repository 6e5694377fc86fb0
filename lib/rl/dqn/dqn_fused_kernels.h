// DqnFusedKernels: the DQN trainer's one-launch kernels and what they take (internal to
// lib/rl/dqn). Acting (online forward + epsilon-greedy: kernels/rl/dqn/dqn_act_fused.h) and a
// whole gradient step (online and target forwards, loss head, backward, clip, AdamW, target
// update: kernels/rl/dqn/dqn_train_step_fused.h), each set up when DqnConfig asks for it
// (fused_acting, fused_train_step) and the network, the batch and the device allow it; a kernel
// not set up reports false and the trainer runs the GEMM path instead.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/nn/mlp_train_step_fused.h"
#include "kernels/rl/dqn/dqn_act_fused.h"
#include "kernels/rl/dqn/dqn_train_step_fused.h"
#include "lib/core/device_buffer.h"
#include "lib/nn/param_slab.h"
#include "lib/rl/dqn/dqn_config.h"
#include "lib/rl/dqn/q_network.h"

namespace resident::dqn {

class DqnFusedKernels {
 public:
  // Setup: views of both finalized, bound slabs (the target slab has the online one's layout),
  // scratch for `env_count` acting rows and `batch` training rows; allocates and zeroes the
  // split-K counters on `stream`.
  DqnFusedKernels(const DqnConfig& config, const QNetwork& online, nn::ParamSlab& online_slab,
                  nn::ParamSlab& target_slab, std::size_t env_count, std::size_t batch,
                  cudaStream_t stream);
  DqnFusedKernels(const DqnFusedKernels&) = delete;
  DqnFusedKernels& operator=(const DqnFusedKernels&) = delete;

  bool acting() const noexcept { return act_grid_ != 0; }
  bool train_step() const noexcept { return step_grid_ != 0; }

  // Hot path, acting() only: actions [env_count] from the online network on observations
  // [env_count, obs] (launch_dqn_act_fused).
  void act(std::int32_t* actions, const float* observations,
           const kernels::dqn::DqnActExploration& exploration, cudaStream_t stream);
  // Hot path, train_step() only: one gradient step on `batch` rows (launch_dqn_train_step_fused).
  void train(const kernels::dqn::DqnFusedOutputs& out, const kernels::dqn::DqnFusedBatch& rows,
             const kernels::dqn::DqnFusedConstants& constants, cudaStream_t stream);

 private:
  // {obs, hidden..., A} when the fused kernels can take the network; empty when not.
  static std::vector<std::size_t> fusable_widths(const DqnConfig& config, const QNetwork& online);
  void set_up_online_views(const std::vector<std::size_t>& widths, const QNetwork& online,
                           nn::ParamSlab& online_slab);
  void set_up_train_step(const std::vector<std::size_t>& widths, const DqnConfig& config,
                         const QNetwork& online, nn::ParamSlab& online_slab,
                         nn::ParamSlab& target_slab, cudaStream_t stream);
  void set_up_acting(const std::vector<std::size_t>& widths, const QNetwork& online);
  float* scratch(std::size_t floats) { return buffers_.emplace_back(floats).data(); }

  std::size_t env_count_ = 0, batch_ = 0;
  unsigned step_grid_ = 0, act_grid_ = 0;  // 0: not set up
  kernels::FusedStepMlp online_;           // the online network's params and grads
  kernels::FusedStepScratch online_scratch_, act_scratch_;
  kernels::dqn::DqnFusedTarget target_;
  kernels::FusedStepOptimizer optimizer_;
  DeviceBuffer<float> act_q_;  // [env_count, A]
  std::vector<DeviceBuffer<float>> buffers_;
  DeviceBuffer<double> norm_partials_;
  DeviceBuffer<std::uint32_t> split_counters_;
};

}  // namespace resident::dqn
