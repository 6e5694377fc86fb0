// Fused AdamW update over a parameter slab (kernels/nn/adamw.cu), with an optional global-norm
// clip folded in and a learning-rate schedule evaluated on the device from the step counter.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels {

// How the learning rate of step t (1-based: the step being taken) follows from the base lr.
//   Constant:      lr_t = lr
//   LinearToZero:  lr_t = lr * max(0, 1 - floor((t - 1) / steps_per_group) / total_groups)
// (LinearToZero keeps one lr for each group of steps_per_group steps and reaches 0 at group
// total_groups: CleanRL's PPO annealing with a group per update.)
enum class LrSchedule : std::uint32_t { Constant, LinearToZero };

// Per-call constants. The host forms each fp32 value from its fp64 configuration (so that, e.g.,
// 1 - beta2 is the correctly rounded 1e-3 and not 1 - fp32(0.999)); what depends on the device
// step is formed on the device in fp64: the bias corrections 1 - beta^t from beta1/beta2_exact,
// lr_t = adamw_lr_at(*this, t) and the decay factor 1 - lr_t * weight_decay, each rounded once to
// fp32.
struct AdamWConstants {
  float beta1 = 0.0f;
  float one_minus_beta1 = 0.0f;
  float beta2 = 0.0f;
  float one_minus_beta2 = 0.0f;
  float eps = 0.0f;
  double lr = 0.0;            // base learning rate
  double weight_decay = 0.0;  // decoupled, applied where the mask is 1
  double beta1_exact = 0.0;   // for 1 - beta1^t
  double beta2_exact = 0.0;   // for 1 - beta2^t
  LrSchedule schedule = LrSchedule::Constant;
  std::uint64_t steps_per_group = 1;  // >= 1 (LinearToZero)
  std::uint64_t total_groups = 1;     // >= 1 (LinearToZero)
};

// lr_t of step t >= 1 in fp64 (host and device evaluate this same function, so the host mirror
// equals the device's value bit for bit; the kernel then rounds it once to fp32).
__host__ __device__ inline double adamw_lr_at(const AdamWConstants& c, std::uint64_t t) {
  if (c.schedule != LrSchedule::LinearToZero) return c.lr;
  const std::uint64_t group = (t == 0 ? 0 : t - 1) / c.steps_per_group;
  const double remaining = 1.0 - static_cast<double>(group) / static_cast<double>(c.total_groups);
  return remaining > 0.0 ? c.lr * remaining : 0.0;
}

// One AdamW step over n elements, in place, the element-wise order of
// tests/reference adamw_step (PyTorch's AdamW) in fp32: with t = *step + 1 (the step as read
// before this call advances it), lr_t = adamw_lr_at(constants, t), d = 1 - lr_t * weight_decay,
// and g = grads[i] * s, where s = *grad_scale (the clip scale; 1 when grad_scale is null),
//   p *= d where decay_mask[i] != 0
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g g
//   p -= lr_t * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
// One kernel: every block reads *step and *grad_scale first; the block that finishes last (a
// ticket from atomicInc on *done_counter, which only picks the block) then writes *step += 1 and
// *grad_scale = 1 (so a later step without clipping is unscaled). *done_counter must be 0 before
// the launch (zero it at setup); the kernel leaves it 0, so launches and graph replays need no
// reset; one counter per slab, one launch on it at a time.
// params, m, v, grads [n] fp32 and decay_mask [n] uint8 must not alias one another; the float
// arrays 16-byte aligned, decay_mask 4-byte aligned (throws otherwise). Deterministic: each
// element is updated by one thread, no float reductions or atomics. Reads the step and scale on
// the device, so the call is graph-capturable, and replays advance the step and follow the lr
// schedule.
void launch_adamw(float* params, float* m, float* v, std::uint64_t* step, float* grad_scale,
                  unsigned int* done_counter, const float* grads, const std::uint8_t* decay_mask,
                  std::size_t n, const AdamWConstants& constants, cudaStream_t stream);

// Global-norm clipping and AdamW in two kernels: launch_global_norm_partials into
// norm_partials [global_norm_partial_count(n)] (overwritten), then the update above where every
// block first reduces the partials itself, in the order of launch_global_norm's finish pass, to
// the norm and the clip scale s (1 when norm <= max_norm, else max_norm / norm; the same bits as
// launch_global_norm gives) and uses that s instead of *grad_scale. The last block also writes
// *norm. Afterwards *grad_scale = 1 (a scale pending from an earlier launch_global_norm is
// discarded; grad_scale may be null) and *step += 1, as in launch_adamw; params, m, v and *step
// are bit for bit those of launch_global_norm followed by launch_adamw. max_norm > 0 (+inf:
// never clips; throws otherwise). Same aliasing, alignment, determinism and capture rules.
void launch_clip_adamw(float* params, float* m, float* v, std::uint64_t* step, float* norm,
                       float* grad_scale, double* norm_partials, unsigned int* done_counter,
                       const float* grads, const std::uint8_t* decay_mask, std::size_t n,
                       float max_norm, const AdamWConstants& constants, cudaStream_t stream);

}  // namespace resident::kernels
