// Fused AdamW update over a parameter slab (kernels/nn/adamw.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels {

// Per-call constants. The host forms each fp32 value from its fp64 configuration (so that, e.g.,
// 1 - beta2 is the correctly rounded 1e-3 and not 1 - fp32(0.999)); the bias corrections
// 1 - beta^t depend on the device step and are formed on the device in fp64 from beta1/beta2.
struct AdamWConstants {
  float lr = 0.0f;
  float beta1 = 0.0f;
  float one_minus_beta1 = 0.0f;
  float beta2 = 0.0f;
  float one_minus_beta2 = 0.0f;
  float eps = 0.0f;
  float decay_factor = 1.0f;  // 1 - lr * weight_decay, applied where the mask is 1
  double beta1_exact = 0.0;   // for 1 - beta1^t
  double beta2_exact = 0.0;   // for 1 - beta2^t
};

// One AdamW step over n elements, in place, the element-wise order of
// tests/reference adamw_step (PyTorch's AdamW): with t = *step + 1 and g = grads[i] * s, where
// s = *grad_scale (the clip scale; 1 when grad_scale is null),
//   p *= decay_factor where decay_mask[i] != 0
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g g
//   p -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
// Then, ordered after the update on `stream`, *step += 1 and *grad_scale = 1 (so a later step
// without clipping is unscaled). params, m, v, grads [n] fp32 and decay_mask [n] uint8 must not
// alias one another; the float arrays 16-byte aligned, decay_mask 4-byte aligned (throws
// otherwise). Deterministic: each element is updated by one thread, no reductions. Reads the
// step and scale on the device, so the call is graph-capturable and replays advance the step.
void launch_adamw(float* params, float* m, float* v, std::uint64_t* step, float* grad_scale,
                  const float* grads, const std::uint8_t* decay_mask, std::size_t n,
                  const AdamWConstants& constants, cudaStream_t stream);

}  // namespace resident::kernels
