// ParamSlab: the parameters, gradients and AdamW state (m, v) of one model, each one contiguous
// device buffer laid out by SlabLayout (every tensor 256-byte aligned, padding kept at zero),
// plus the per-element weight-decay mask (uint8), three device scalars (the AdamW step counter,
// the last global gradient norm, the pending clip scale), the norm's fp64 scratch and AdamW's
// ticket counter, all allocated once in finalize(). Layers get views by name. Zeroing grads,
// global-norm clipping with AdamW, and checkpointing are each one call over the whole slab.
//
//   ParamSlab slab;
//   slab.add("fc1.weight", {256, 64}, /*decay=*/true);
//   slab.add("fc1.bias", {256}, /*decay=*/false);
//   slab.finalize();                                  // setup: allocates, zeroes, syncs
//   float* w = slab.param("fc1.weight");  float* dw = slab.grad("fc1.weight");
//   ... per step, all on one stream, graph-capturable:
//   slab.zero_grads(s);  <backward accumulates into the grad views>
//   slab.clip_and_adamw_step(1.0f, config, s);        // norm, clip and AdamW: two kernels
//
// Hot-path calls (zero_grads, clip_and_adamw_step, global_grad_norm_and_clip, adamw_step) only
// enqueue work on the given stream: no allocation, no copies, no host synchronization; their
// host-side checks of the arguments throw before anything is enqueued. Clipping does not rewrite
// the grads: clip_and_adamw_step applies the scale inside the update; the separate
// global_grad_norm_and_clip leaves its scale on the device and the next adamw_step multiplies
// every gradient by it (the pair gives the same bits as clip_and_adamw_step, in one more
// kernel). Every AdamW step resets the scale to 1 (an adamw_step with no clip before it is
// unscaled). The step counter lives on the device, so graph replays advance it and the bias
// correction and the learning-rate schedule follow it. Values the host passes (max_norm, the
// AdamW config) are baked into a captured graph.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/nn/adamw.h"
#include "lib/core/device_buffer.h"
#include "lib/nn/slab_layout.h"

namespace resident::nn {

// The learning-rate schedules (kernels/nn/adamw.h): with t the 1-based step being taken,
//   Constant:      lr_t = lr
//   LinearToZero:  lr_t = lr * max(0, 1 - floor((t - 1) / steps_per_group) / total_groups)
using LrSchedule = kernels::LrSchedule;

// torch.optim.AdamW's hyperparameters; the update is tests/reference adamw_step's at lr_t, and
// the weight decay uses lr_t too (p *= 1 - lr_t * weight_decay, as PyTorch's schedulers do).
// The schedule is evaluated on the device from the slab's step counter, so a captured graph
// follows it without re-capture.
struct AdamWConfig {
  double lr = 1e-3;           // finite, >= 0
  double beta1 = 0.9;         // in [0, 1)
  double beta2 = 0.999;       // in [0, 1)
  double eps = 1e-8;          // finite, > 0
  double weight_decay = 0.0;  // finite, >= 0; decoupled, only on tensors added with decay
  LrSchedule schedule = LrSchedule::Constant;  // Constant or LinearToZero
  std::uint64_t steps_per_group = 1;  // >= 1; LinearToZero: steps that share one lr
  std::uint64_t total_groups = 1;     // >= 1; LinearToZero: groups until lr_t reaches 0
};

// lr_t of the 1-based step t >= 1 under config's schedule (the host mirror of the device's
// evaluation: the same fp64 bits, which the kernel rounds once to fp32). Throws
// resident::Error naming the field, its value and the allowed range on an invalid config.
double scheduled_lr(const AdamWConfig& config, std::uint64_t t);

// The AdamW kernel's constants for `config` (fp32 values rounded once from the fp64 config, the
// exact betas and the schedule), as every ParamSlab optimizer call forms them. Throws
// resident::Error naming `call`, the field, its value and the allowed range on an invalid config.
kernels::AdamWConstants adamw_constants(const AdamWConfig& config, const char* call);

// The four float slabs, for the setup/test copies.
enum class SlabPart { Params, Grads, AdamM, AdamV };

class ParamSlab {
 public:
  ParamSlab() = default;
  ParamSlab(ParamSlab&&) noexcept = default;
  ParamSlab& operator=(ParamSlab&&) noexcept = default;
  ParamSlab(const ParamSlab&) = delete;
  ParamSlab& operator=(const ParamSlab&) = delete;

  // ----- setup
  // Declares a tensor (SlabLayout::add's rules); only before finalize().
  const SlabTensor& add(std::string name, std::vector<std::size_t> shape, bool decay);
  // Allocates the slabs, zeroes params, grads, m, v, the step, the norm and the ticket counter,
  // sets the clip scale to 1, uploads the decay mask, and synchronizes the device (setup phase).
  // Once; throws on an empty slab or an allocation failure.
  void finalize();
  bool finalized() const noexcept { return finalized_; }

  const SlabLayout& layout() const noexcept { return layout_; }
  std::size_t total_elements() const noexcept { return layout_.total_elements(); }

  // ----- views (after finalize; an unknown name throws resident::Error naming it)
  float* param(std::string_view name);
  const float* param(std::string_view name) const;
  float* grad(std::string_view name);
  const float* grad(std::string_view name) const;
  std::size_t size(std::string_view name) const { return layout_.tensor(name).size; }
  const std::vector<std::size_t>& shape(std::string_view name) const {
    return layout_.tensor(name).shape;
  }

  // Whole slabs [total_elements()], 256-byte aligned.
  float* params() noexcept { return params_.data(); }
  const float* params() const noexcept { return params_.data(); }
  float* grads() noexcept { return grads_.data(); }
  const float* grads() const noexcept { return grads_.data(); }
  const float* adam_m() const noexcept { return m_.data(); }
  const float* adam_v() const noexcept { return v_.data(); }
  const std::uint8_t* decay_mask() const noexcept { return mask_.data(); }

  // Device scalars (read them back with a ScalarReadback at a sanctioned point).
  const float* grad_norm() const noexcept { return scalars_.data(); }          // last computed
  const float* clip_scale() const noexcept { return scalars_.data() + 1; }     // for the next step
  const std::uint64_t* step_counter() const noexcept { return step_.data(); }  // updates done

  // The mutable device state of the optimizer, for a fused kernel that runs this slab's norm,
  // clip and AdamW itself (kernels/nn/mlp_train_step_fused.h) with the semantics of
  // clip_and_adamw_step. After finalize (throws before).
  struct OptimizerViews {
    float* params;
    float* grads;
    float* m;
    float* v;
    const std::uint8_t* decay_mask;
    std::size_t n;             // total_elements()
    std::uint64_t* step;       // the step counter
    float* grad_norm;          // grad_norm()
    float* clip_scale;         // clip_scale()
  };
  OptimizerViews optimizer_views();

  // ----- hot path (after finalize; enqueued on `stream`; capturable)
  // grads = 0 over the whole slab (one cudaMemsetAsync).
  void zero_grads(cudaStream_t stream);
  // grad_norm = sqrt(sum grads^2) over the slab; clip_scale = 1 when the norm <= max_norm, else
  // max_norm / norm (applied by the next adamw_step). max_norm > 0; +inf measures the norm
  // without ever clipping. Deterministic.
  void global_grad_norm_and_clip(float max_norm, cudaStream_t stream);
  // One fused AdamW update of every element with the grads times the clip scale, bias
  // correction and lr_t from the device step; then step += 1 and clip_scale = 1. One kernel.
  // Throws on an invalid config.
  void adamw_step(const AdamWConfig& config, cudaStream_t stream);
  // global_grad_norm_and_clip(max_norm) and adamw_step(config) in two kernels (the grads' fp64
  // partial sums of squares, then the update, each of whose blocks finishes the norm itself):
  // grad_norm, params, m, v and the step are bit for bit those of the two calls; clip_scale is 1
  // afterwards (a scale pending from an earlier global_grad_norm_and_clip is not applied).
  // Throws on max_norm <= 0 or an invalid config before enqueuing anything.
  void clip_and_adamw_step(float max_norm, const AdamWConfig& config, cudaStream_t stream);

  // ----- checkpoint phase (blocking: ordered after the work on `stream`, then synchronized)
  // Writes params, m, v, the step and the layout to `path` atomically (slab_checkpoint.h).
  void save(const std::filesystem::path& path, cudaStream_t stream) const;
  // Reads `path` and replaces params, m, v and the step (and sets clip_scale to 1). A file of a
  // different layout, a corrupt, truncated or foreign file throws resident::Error naming what
  // differs, before anything on the device changes. Grads are not touched.
  void load(const std::filesystem::path& path, cudaStream_t stream);

  // ----- setup and test copies (blocking, like the checkpoint phase; never on a hot path)
  std::vector<float> download(SlabPart part, cudaStream_t stream) const;
  // The whole slab [total_elements()]; padding must be 0 (throws naming the first element
  // that is not).
  void upload(SlabPart part, std::span<const float> values, cudaStream_t stream);
  // One tensor [size(name)].
  void upload(SlabPart part, std::string_view name, std::span<const float> values,
              cudaStream_t stream);
  std::uint64_t read_step(cudaStream_t stream) const;

 private:
  void require_finalized(const char* call) const;
  DeviceBuffer<float>& buffer(SlabPart part) noexcept;
  const DeviceBuffer<float>& buffer(SlabPart part) const noexcept;

  SlabLayout layout_;
  bool finalized_ = false;
  DeviceBuffer<float> params_, grads_, m_, v_;  // [total_elements()] each
  DeviceBuffer<std::uint8_t> mask_;             // [total_elements()]
  DeviceBuffer<float> scalars_;                 // [2]: grad norm, clip scale
  DeviceBuffer<std::uint64_t> step_;            // [1]
  DeviceBuffer<double> norm_partials_;          // [global_norm_partial_count(total)]
  DeviceBuffer<unsigned int> done_counter_;     // [1]: AdamW's last-block ticket, 0 between steps
};

}  // namespace resident::nn
