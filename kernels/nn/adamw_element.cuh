// The AdamW update of one element and of a strided range of a slab (device code: include from .cu
// files only). Shared by the slab's AdamW kernels (kernels/nn/adamw.cu) and the fused MLP train
// step (kernels/nn/mlp_train_step_fused.cu), so that both apply the same fp32 operations in the
// same order: the element-wise order of tests/reference adamw_step (PyTorch's AdamW).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/nn/adamw.h"

namespace resident::kernels::adamw_detail {

// What one step's update needs beyond the constants, formed once per block.
struct StepFactors {
  float lr;                // lr_t, rounded once from adamw_lr_at's fp64 value
  float decay_factor;      // 1 - lr_t * weight_decay (product rounded first, as the host does)
  float bias_correction1;  // 1 - beta1^t
  float bias_correction2;  // 1 - beta2^t
  float grad_scale;        // the clip scale multiplying every gradient
};

// The factors of the step taken when the device step counter reads `step` (t = step + 1), each
// formed in fp64 and rounded once to fp32.
__device__ inline StepFactors step_factors(const AdamWConstants& c, std::uint64_t step,
                                           float grad_scale) {
  const double t = static_cast<double>(step + 1);
  const double lr = adamw_lr_at(c, step + 1);
  StepFactors f;
  f.lr = static_cast<float>(lr);
  f.decay_factor = static_cast<float>(1.0 - __dmul_rn(lr, c.weight_decay));
  f.bias_correction1 = static_cast<float>(1.0 - pow(c.beta1_exact, t));
  f.bias_correction2 = static_cast<float>(1.0 - pow(c.beta2_exact, t));
  f.grad_scale = grad_scale;
  return f;
}

// The reference's order of operations, in fp32.
__device__ __forceinline__ void update_element(float& p, float& m, float& v, float grad, bool decay,
                                               const AdamWConstants& c, const StepFactors& f) {
  if (decay) p *= f.decay_factor;
  const float g = grad * f.grad_scale;
  m = c.beta1 * m + c.one_minus_beta1 * g;
  v = c.beta2 * v + c.one_minus_beta2 * g * g;
  const float m_hat = m / f.bias_correction1;
  const float v_hat = v / f.bias_correction2;
  p -= f.lr * m_hat / (sqrtf(v_hat) + c.eps);
}

// The update of one float4 group (the mask as uchar4), in place.
__device__ __forceinline__ void update_group(float4& p, float4& m, float4& v, const float4 g,
                                             const uchar4 k, const AdamWConstants& c,
                                             const StepFactors& f) {
  update_element(p.x, m.x, v.x, g.x, k.x != 0, c, f);
  update_element(p.y, m.y, v.y, g.y, k.y != 0, c, f);
  update_element(p.z, m.z, v.z, g.z, k.z != 0, c, f);
  update_element(p.w, m.w, v.w, g.w, k.w != 0, c, f);
}

// Updates elements [0, n) visited by one thread: the float4 groups first, first + stride, ...
// (params, m, v, grads as float4, the mask as uchar4: 16- and 4-byte aligned), then element
// 4 * (n / 4) + first of the n % 4 tail when it exists. With first = the thread's global index
// and stride = the grid's thread count, every element is updated by exactly one thread.
// skip_first_group: group `first` is left to the caller (who updated it with update_group).
__device__ inline void update_range(float* __restrict__ params, float* __restrict__ m,
                                    float* __restrict__ v, const float* __restrict__ grads,
                                    const std::uint8_t* __restrict__ decay_mask, std::size_t n,
                                    std::size_t first, std::size_t stride,
                                    const AdamWConstants& c, const StepFactors& f,
                                    bool skip_first_group = false) {
  const std::size_t groups = n / 4;
  auto* p4 = reinterpret_cast<float4*>(params);
  auto* m4 = reinterpret_cast<float4*>(m);
  auto* v4 = reinterpret_cast<float4*>(v);
  const auto* g4 = reinterpret_cast<const float4*>(grads);
  const auto* k4 = reinterpret_cast<const uchar4*>(decay_mask);
  for (std::size_t i = skip_first_group ? first + stride : first; i < groups; i += stride) {
    float4 pp = p4[i], mm = m4[i], vv = v4[i];
    update_group(pp, mm, vv, g4[i], k4[i], c, f);
    p4[i] = pp;
    m4[i] = mm;
    v4[i] = vv;
  }
  const std::size_t tail = groups * 4 + first;
  if (tail < n)
    update_element(params[tail], m[tail], v[tail], grads[tail], decay_mask[tail] != 0, c, f);
}

}  // namespace resident::kernels::adamw_detail
