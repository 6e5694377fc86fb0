#include "lib/models/cfc/cfc_model.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/cfc/cfc_backward_steps.h"
#include "kernels/models/cfc/cfc_forward_steps.h"
#include "kernels/models/cfc/cfc_time_major.h"
#include "kernels/models/cfc/cfc_transpose.h"
#include "kernels/nn/bias.h"
#include "lib/models/cfc/cfc_init.h"
#include "lib/nn/linear.h"

namespace resident::models {

namespace {

const ModelShape& validated(const ModelShape& shape, const CfcConfig& config) {
  validate_cfc_config(config, shape);
  return shape;
}

struct Sizes {
  std::size_t xt, recurrent_t, heads_t, p_in, z, cell, hs, dg, dp, q, dh;
};

Sizes sizes_of(const CfcConfig& c, const ModelShape& s) {
  const std::size_t L = s.window, B = s.max_batch, H = c.hidden, U = c.units;
  const std::size_t G = cfc_head_count(c.mode) * H;
  const std::size_t cell = c.mode == CfcMode::Pure ? H : 3 * H;
  const std::size_t q = c.mode == CfcMode::Pure ? L * B * H : 0;
  return {L * B * s.features, H * U, U * G, L * B * U, L * B * U, L * B * cell,
          (L + 1) * B * H, L * B * G, L * B * U, q, B * H};
}

std::size_t scratch_bytes(const CfcConfig& c, const ModelShape& s) {
  validate_cfc_config(c, s);
  const Sizes z = sizes_of(c, s);
  ScratchPlan plan;
  for (const std::size_t n :
       {z.xt, z.recurrent_t, z.heads_t, z.p_in, z.z, z.cell, z.hs, z.dg, z.dp, z.q, z.q, z.dh})
    plan.add<float>(n);
  return plan.bytes();
}

// NaN-filled (0xFF bytes) at construction, so unwritten reads show.
float* take_poisoned(ScratchArena& arena, std::size_t count) {
  float* p = arena.take<float>(count);
  if (p != nullptr) RESIDENT_CUDA_CHECK(cudaMemset(p, 0xFF, count * sizeof(float)));
  return p;
}

}  // namespace

CfcModel::CfcModel(const ModelShape& shape, const CfcConfig& config, std::uint64_t seed)
    : shape_(validated(shape, config)), config_(config), arena_(scratch_bytes(config, shape)) {
  const std::vector<CfcTensorSpec> specs = cfc_tensor_specs(config_, shape_);
  for (const CfcTensorSpec& t : specs) slab_.add(t.name, t.shape, t.decay);
  slab_.finalize();
  const std::vector<std::vector<float>> init = cfc_initial_values(config_, shape_, seed);
  for (std::size_t i = 0; i < specs.size(); ++i)
    slab_.upload(nn::SlabPart::Params, specs[i].name, init[i], nullptr);

  const Sizes z = sizes_of(config_, shape_);
  xt_ = take_poisoned(arena_, z.xt);
  recurrent_t_ = take_poisoned(arena_, z.recurrent_t);
  heads_t_ = take_poisoned(arena_, z.heads_t);
  p_in_ = take_poisoned(arena_, z.p_in);
  z_ = take_poisoned(arena_, z.z);
  cell_ = take_poisoned(arena_, z.cell);
  hs_ = take_poisoned(arena_, z.hs);
  dg_ = take_poisoned(arena_, z.dg);
  dp_ = take_poisoned(arena_, z.dp);
  qa_ = take_poisoned(arena_, z.q);
  qw_ = take_poisoned(arena_, z.q);
  dh_ = take_poisoned(arena_, z.dh);
  RESIDENT_CUDA_CHECK(cudaDeviceSynchronize());  // setup: the poisoning memsets are done
}

kernels::cfc::CfcStepShape CfcModel::step_shape(std::size_t batch) const {
  kernels::cfc::CfcStepShape s;
  s.batch = static_cast<int>(batch);
  s.window = static_cast<int>(shape_.window);
  s.features = static_cast<int>(shape_.features);
  s.hidden = static_cast<int>(config_.hidden);
  s.units = static_cast<int>(config_.units);
  s.pure = config_.mode == CfcMode::Pure;
  s.time_column = static_cast<int>(config_.time_column);
  return s;
}

std::size_t CfcModel::steps_per_launch() const {
  return config_.steps_per_launch == 0 ? shape_.window : config_.steps_per_launch;
}

void CfcModel::forward(const StreamContext& context, const float* x, std::size_t batch,
                       float* prediction) {
  if (batch < 1 || batch > shape_.max_batch)
    throw Error("CfcModel::forward", "invalid argument",
                "batch = " + std::to_string(batch) + ", allowed [1, " +
                    std::to_string(shape_.max_batch) + "]",
                __FILE__, __LINE__);
  const NvtxRange range("cfc/forward");
  const cudaStream_t stream = context.stream();
  const std::size_t L = shape_.window, F = shape_.features, H = config_.hidden;
  const std::size_t U = config_.units, G = cfc_head_count(config_.mode) * H;
  const bool pure = config_.mode == CfcMode::Pure;

  kernels::cfc::launch_cfc_time_major(xt_, x, batch, L, F, stream);
  kernels::cfc::launch_cfc_transpose(recurrent_t_, slab_.param("backbone.recurrent_weight"), U,
                                     H, stream);
  kernels::cfc::launch_cfc_transpose(heads_t_, slab_.param("heads.weight"), G, U, stream);
  nn::linear_forward(context, {L * batch, F, U}, p_in_, xt_, slab_.param("backbone.input_weight"),
                     nullptr);

  kernels::cfc::CfcForwardWeights w;
  w.recurrent_t = recurrent_t_;
  w.backbone_bias = slab_.param("backbone.bias");
  w.heads_t = heads_t_;
  w.heads_bias = slab_.param("heads.bias");
  w.w_tau = pure ? slab_.param("w_tau") : nullptr;
  w.A = pure ? slab_.param("A") : nullptr;
  const kernels::cfc::CfcStepShape s = step_shape(batch);
  const std::size_t k = steps_per_launch();
  for (std::size_t t0 = 0; t0 < L; t0 += k)
    kernels::cfc::launch_cfc_forward_steps(z_, cell_, hs_, p_in_, xt_, w, s,
                                           static_cast<int>(t0),
                                           static_cast<int>(std::min(L, t0 + k)), stream);

  nn::linear_forward(context, {batch, H, shape_.outputs}, prediction, hs_ + L * batch * H,
                     slab_.param("readout.weight"), slab_.param("readout.bias"));
  last_batch_ = batch;
}

void CfcModel::backward(const StreamContext& context, const float* x, const float* d_prediction,
                        std::size_t batch) {
  (void)x;  // the forward saved its time-major copy
  if (last_batch_ == 0 || batch != last_batch_)
    throw Error("CfcModel::backward", "invalid argument",
                "batch = " + std::to_string(batch) + ", the last forward's batch is " +
                    (last_batch_ == 0 ? std::string("none (no forward ran)")
                                      : std::to_string(last_batch_)),
                __FILE__, __LINE__);
  const NvtxRange range("cfc/backward");
  const cudaStream_t stream = context.stream();
  const std::size_t L = shape_.window, F = shape_.features, H = config_.hidden;
  const std::size_t U = config_.units, G = cfc_head_count(config_.mode) * H;
  const bool pure = config_.mode == CfcMode::Pure;
  const float* h_last = hs_ + L * batch * H;

  // Readout: dh_{L-1} (overwritten), then its weight and bias gradients (added).
  const nn::LinearShape readout{batch, H, shape_.outputs};
  nn::linear_backward(context, readout, {dh_, nullptr, nullptr}, h_last,
                      slab_.param("readout.weight"), d_prediction, nn::GradMode::Overwrite);
  nn::linear_backward(context, readout,
                      {nullptr, slab_.grad("readout.weight"), slab_.grad("readout.bias")}, h_last,
                      slab_.param("readout.weight"), d_prediction, nn::GradMode::Accumulate);

  kernels::cfc::CfcBackwardWeights w;
  w.heads_weight = slab_.param("heads.weight");
  w.recurrent_weight = slab_.param("backbone.recurrent_weight");
  w.w_tau = pure ? slab_.param("w_tau") : nullptr;
  w.A = pure ? slab_.param("A") : nullptr;
  kernels::cfc::CfcBackwardOutputs out;
  out.dg = dg_;
  out.dp = dp_;
  out.qa = pure ? qa_ : nullptr;
  out.qw = pure ? qw_ : nullptr;
  out.dh = dh_;
  const kernels::cfc::CfcStepShape s = step_shape(batch);
  const std::size_t k = steps_per_launch();
  for (std::size_t t1 = L; t1 > 0; t1 -= std::min(t1, k)) {
    const std::size_t t0 = t1 - std::min(t1, k);
    kernels::cfc::launch_cfc_backward_steps(out, z_, cell_, xt_, w, s, static_cast<int>(t0),
                                            static_cast<int>(t1), stream);
  }

  // The weight gradients: one GEMM each over all L * batch (step, row) pairs.
  const std::size_t rows = L * batch;
  nn::linear_backward(context, {rows, U, G},
                      {nullptr, slab_.grad("heads.weight"), slab_.grad("heads.bias")}, z_,
                      slab_.param("heads.weight"), dg_, nn::GradMode::Accumulate);
  nn::linear_backward(context, {rows, F, U},
                      {nullptr, slab_.grad("backbone.input_weight"), slab_.grad("backbone.bias")},
                      xt_, slab_.param("backbone.input_weight"), dp_, nn::GradMode::Accumulate);
  // hs_[0 .. L) are the states entering each step (hs_[0] = 0).
  nn::linear_backward(context, {rows, H, U},
                      {nullptr, slab_.grad("backbone.recurrent_weight"), nullptr}, hs_,
                      slab_.param("backbone.recurrent_weight"), dp_, nn::GradMode::Accumulate);
  if (pure) {
    kernels::launch_bias_grad(slab_.grad("A"), qa_, rows, H, nn::GradMode::Accumulate, stream);
    kernels::launch_bias_grad(slab_.grad("w_tau"), qw_, rows, H, nn::GradMode::Accumulate, stream);
  }
}

std::unique_ptr<SupervisedModel> make_cfc_model(const ModelShape& shape, std::uint64_t seed) {
  return std::make_unique<CfcModel>(shape, CfcConfig{}, seed);
}

}  // namespace resident::models
