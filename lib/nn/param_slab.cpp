#include "lib/nn/param_slab.h"

#include <cmath>
#include <string>
#include <utility>

#include "kernels/nn/global_norm.h"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "lib/nn/slab_checkpoint.h"

namespace resident::nn {

namespace {

const char* part_name(SlabPart part) {
  switch (part) {
    case SlabPart::Params: return "params";
    case SlabPart::Grads: return "grads";
    case SlabPart::AdamM: return "m";
    case SlabPart::AdamV: return "v";
  }
  return "?";
}

void require_config(bool condition, const char* call, const std::string& detail, int line) {
  if (!condition) throw Error(call, "invalid AdamW config", detail, __FILE__, line);
}


// Blocking copies ordered after the work on `stream`.
void copy_to_host(void* host, const void* device, std::size_t bytes, cudaStream_t stream) {
  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream));
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void copy_to_device(void* device, const void* host, std::size_t bytes, cudaStream_t stream) {
  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream));
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace

kernels::AdamWConstants adamw_constants(const AdamWConfig& c, const char* call) {
  require_config(std::isfinite(c.lr) && c.lr >= 0.0, call,
                 "lr = " + std::to_string(c.lr) + ", must be finite and >= 0", __LINE__);
  require_config(c.beta1 >= 0.0 && c.beta1 < 1.0, call,
                 "beta1 = " + std::to_string(c.beta1) + ", must be in [0, 1)", __LINE__);
  require_config(c.beta2 >= 0.0 && c.beta2 < 1.0, call,
                 "beta2 = " + std::to_string(c.beta2) + ", must be in [0, 1)", __LINE__);
  // eps > 0 also keeps the zero padding at zero (0 / (0 + eps)).
  require_config(std::isfinite(c.eps) && c.eps > 0.0, call,
                 "eps = " + std::to_string(c.eps) + ", must be finite and > 0", __LINE__);
  require_config(std::isfinite(c.weight_decay) && c.weight_decay >= 0.0, call,
                 "weight_decay = " + std::to_string(c.weight_decay) + ", must be finite and >= 0",
                 __LINE__);
  require_config(c.schedule == LrSchedule::Constant || c.schedule == LrSchedule::LinearToZero,
                 call,
                 "schedule = " + std::to_string(static_cast<std::uint32_t>(c.schedule)) +
                     ", must be Constant (0) or LinearToZero (1)",
                 __LINE__);
  require_config(c.steps_per_group >= 1, call,
                 "steps_per_group = " + std::to_string(c.steps_per_group) + ", must be >= 1",
                 __LINE__);
  require_config(c.total_groups >= 1, call,
                 "total_groups = " + std::to_string(c.total_groups) + ", must be >= 1", __LINE__);
  kernels::AdamWConstants k;
  k.beta1 = static_cast<float>(c.beta1);
  k.one_minus_beta1 = static_cast<float>(1.0 - c.beta1);
  k.beta2 = static_cast<float>(c.beta2);
  k.one_minus_beta2 = static_cast<float>(1.0 - c.beta2);
  k.eps = static_cast<float>(c.eps);
  k.lr = c.lr;
  k.weight_decay = c.weight_decay;
  k.beta1_exact = c.beta1;
  k.beta2_exact = c.beta2;
  k.schedule = c.schedule;
  k.steps_per_group = c.steps_per_group;
  k.total_groups = c.total_groups;
  return k;
}

double scheduled_lr(const AdamWConfig& config, std::uint64_t t) {
  if (t == 0)
    throw Error("nn::scheduled_lr", "invalid argument", "t = 0, the first step is t = 1",
                __FILE__, __LINE__);
  return kernels::adamw_lr_at(adamw_constants(config, "nn::scheduled_lr"), t);
}

// ----- setup

const SlabTensor& ParamSlab::add(std::string name, std::vector<std::size_t> shape, bool decay) {
  if (finalized_)
    throw Error("ParamSlab::add(\"" + name + "\")", "slab finalized",
                "tensors are declared before finalize()", __FILE__, __LINE__);
  return layout_.add(std::move(name), std::move(shape), decay);
}

void ParamSlab::finalize() {
  if (finalized_)
    throw Error("ParamSlab::finalize", "slab finalized", "finalize() runs once", __FILE__,
                __LINE__);
  if (layout_.empty())
    throw Error("ParamSlab::finalize", "empty slab", "add() at least one tensor first", __FILE__,
                __LINE__);
  const std::size_t total = layout_.total_elements();
  params_ = DeviceBuffer<float>(total);
  grads_ = DeviceBuffer<float>(total);
  m_ = DeviceBuffer<float>(total);
  v_ = DeviceBuffer<float>(total);
  mask_ = DeviceBuffer<std::uint8_t>(total);
  scalars_ = DeviceBuffer<float>(2);
  step_ = DeviceBuffer<std::uint64_t>(1);
  norm_partials_ = DeviceBuffer<double>(kernels::global_norm_partial_count(total));
  done_counter_ = DeviceBuffer<unsigned int>(1);
  for (DeviceBuffer<float>* slab : {&params_, &grads_, &m_, &v_})
    RESIDENT_CUDA_CHECK(cudaMemset(slab->data(), 0, slab->bytes()));
  RESIDENT_CUDA_CHECK(cudaMemset(step_.data(), 0, step_.bytes()));
  RESIDENT_CUDA_CHECK(cudaMemset(done_counter_.data(), 0, done_counter_.bytes()));
  const std::vector<float> norm_and_scale = {0.0f, 1.0f};
  scalars_.upload(norm_and_scale);
  mask_.upload(layout_.decay_mask());
  // The memsets and copies ran on the legacy default stream, which the library's non-blocking
  // streams do not wait for.
  RESIDENT_CUDA_CHECK(cudaDeviceSynchronize());
  finalized_ = true;
}

void ParamSlab::require_finalized(const char* call) const {
  if (!finalized_)
    throw Error(std::string("ParamSlab::") + call, "slab not finalized",
                "call finalize() after the last add()", __FILE__, __LINE__);
}

DeviceBuffer<float>& ParamSlab::buffer(SlabPart part) noexcept {
  switch (part) {
    case SlabPart::Grads: return grads_;
    case SlabPart::AdamM: return m_;
    case SlabPart::AdamV: return v_;
    case SlabPart::Params: break;
  }
  return params_;
}

const DeviceBuffer<float>& ParamSlab::buffer(SlabPart part) const noexcept {
  return const_cast<ParamSlab*>(this)->buffer(part);
}

// ----- views

float* ParamSlab::param(std::string_view name) {
  require_finalized("param");
  return params_.data() + layout_.tensor(name).offset;
}

const float* ParamSlab::param(std::string_view name) const {
  require_finalized("param");
  return params_.data() + layout_.tensor(name).offset;
}

float* ParamSlab::grad(std::string_view name) {
  require_finalized("grad");
  return grads_.data() + layout_.tensor(name).offset;
}

const float* ParamSlab::grad(std::string_view name) const {
  require_finalized("grad");
  return grads_.data() + layout_.tensor(name).offset;
}

// ----- hot path

void ParamSlab::zero_grads(cudaStream_t stream) {
  require_finalized("zero_grads");
  const NvtxRange range("nn/zero_grads");
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, grads_.bytes(), stream));
}

void ParamSlab::global_grad_norm_and_clip(float max_norm, cudaStream_t stream) {
  require_finalized("global_grad_norm_and_clip");
  if (!(max_norm > 0.0f))
    throw Error("ParamSlab::global_grad_norm_and_clip", "invalid argument",
                "max_norm = " + std::to_string(max_norm) + ", must be > 0", __FILE__, __LINE__);
  kernels::launch_global_norm(scalars_.data(), scalars_.data() + 1, norm_partials_.data(),
                              grads_.data(), grads_.size(), max_norm, stream);
}

void ParamSlab::adamw_step(const AdamWConfig& config, cudaStream_t stream) {
  require_finalized("adamw_step");
  const kernels::AdamWConstants constants = adamw_constants(config, "ParamSlab::adamw_step");
  kernels::launch_adamw(params_.data(), m_.data(), v_.data(), step_.data(), scalars_.data() + 1,
                        done_counter_.data(), grads_.data(), mask_.data(), params_.size(),
                        constants, stream);
}

void ParamSlab::clip_and_adamw_step(float max_norm, const AdamWConfig& config,
                                    cudaStream_t stream) {
  require_finalized("clip_and_adamw_step");
  if (!(max_norm > 0.0f))
    throw Error("ParamSlab::clip_and_adamw_step", "invalid argument",
                "max_norm = " + std::to_string(max_norm) + ", must be > 0", __FILE__, __LINE__);
  const kernels::AdamWConstants constants =
      adamw_constants(config, "ParamSlab::clip_and_adamw_step");
  kernels::launch_clip_adamw(params_.data(), m_.data(), v_.data(), step_.data(), scalars_.data(),
                             scalars_.data() + 1, norm_partials_.data(), done_counter_.data(),
                             grads_.data(), mask_.data(), params_.size(), max_norm, constants,
                             stream);
}

ParamSlab::OptimizerViews ParamSlab::optimizer_views() {
  require_finalized("optimizer_views");
  return {params_.data(), grads_.data(), m_.data(),      v_.data(),          mask_.data(),
          params_.size(), step_.data(),  scalars_.data(), scalars_.data() + 1};
}

// ----- checkpoint phase

void ParamSlab::save(const std::filesystem::path& path, cudaStream_t stream) const {
  require_finalized("save");
  const NvtxRange range("nn/slab_save");
  SlabState state;
  state.params = download(SlabPart::Params, stream);
  state.m = download(SlabPart::AdamM, stream);
  state.v = download(SlabPart::AdamV, stream);
  state.step = read_step(stream);
  write_slab_checkpoint(path, layout_, state);
}

void ParamSlab::load(const std::filesystem::path& path, cudaStream_t stream) {
  require_finalized("load");
  const NvtxRange range("nn/slab_load");
  const SlabState state = read_slab_checkpoint(path, layout_);  // throws before any change
  const float one = 1.0f;
  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(params_.data(), state.params.data(), params_.bytes(),
                                      cudaMemcpyHostToDevice, stream));
  RESIDENT_CUDA_CHECK(
      cudaMemcpyAsync(m_.data(), state.m.data(), m_.bytes(), cudaMemcpyHostToDevice, stream));
  RESIDENT_CUDA_CHECK(
      cudaMemcpyAsync(v_.data(), state.v.data(), v_.bytes(), cudaMemcpyHostToDevice, stream));
  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(step_.data(), &state.step, sizeof state.step,
                                      cudaMemcpyHostToDevice, stream));
  RESIDENT_CUDA_CHECK(
      cudaMemcpyAsync(scalars_.data() + 1, &one, sizeof one, cudaMemcpyHostToDevice, stream));
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host sources must outlive the copies
}

// ----- setup and test copies

std::vector<float> ParamSlab::download(SlabPart part, cudaStream_t stream) const {
  require_finalized("download");
  const DeviceBuffer<float>& slab = buffer(part);
  std::vector<float> host(slab.size());
  copy_to_host(host.data(), slab.data(), slab.bytes(), stream);
  return host;
}

void ParamSlab::upload(SlabPart part, std::span<const float> values, cudaStream_t stream) {
  require_finalized("upload");
  DeviceBuffer<float>& slab = buffer(part);
  if (values.size() != slab.size())
    throw Error(
        std::string("ParamSlab::upload(") + part_name(part) + ")", "size mismatch",
        std::to_string(values.size()) + " values for a slab of " + std::to_string(slab.size()),
        __FILE__, __LINE__);
  std::size_t next = 0;  // first element of the next padding gap
  auto check_zero = [&](std::size_t end) {
    for (std::size_t i = next; i < end; ++i)
      if (values[i] != 0.0f)
        throw Error(std::string("ParamSlab::upload(") + part_name(part) + ")", "nonzero padding",
                    "element " + std::to_string(i) + " = " + std::to_string(values[i]) +
                        " lies in the padding between tensors, which stays 0",
                    __FILE__, __LINE__);
  };
  for (const SlabTensor& t : layout_.tensors()) {
    check_zero(t.offset);
    next = t.offset + t.size;
  }
  check_zero(values.size());
  copy_to_device(slab.data(), values.data(), slab.bytes(), stream);
}

void ParamSlab::upload(SlabPart part, std::string_view name, std::span<const float> values,
                       cudaStream_t stream) {
  require_finalized("upload");
  const SlabTensor& t = layout_.tensor(name);
  if (values.size() != t.size)
    throw Error(std::string("ParamSlab::upload(") + part_name(part) + ", \"" + t.name + "\")",
                "size mismatch",
                std::to_string(values.size()) + " values for a tensor of " + std::to_string(t.size),
                __FILE__, __LINE__);
  copy_to_device(buffer(part).data() + t.offset, values.data(), values.size_bytes(), stream);
}

std::uint64_t ParamSlab::read_step(cudaStream_t stream) const {
  require_finalized("read_step");
  std::uint64_t step = 0;
  copy_to_host(&step, step_.data(), sizeof step, stream);
  return step;
}

}  // namespace resident::nn
