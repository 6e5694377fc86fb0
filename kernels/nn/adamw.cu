// Fused AdamW over the slab. adamw_update: grid-stride over float4 groups (params, m, v, grads as
// float4, the mask as uchar4), then the n % 4 tail elements by the first threads of the grid;
// thread 0 of each block forms the bias corrections 1 - beta^t in fp64 from the device step once
// per block. adamw_advance (one thread, after the update on the stream): step += 1, scale = 1.
// One thread per element and no reductions: bit-for-bit reproducible.
#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/nn/adamw.h"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr unsigned kBlock = 256;
constexpr unsigned kMaxGrid = 2048;  // grid-stride beyond ~2 waves of an H200

struct BlockFactors {
  float bias_correction1;
  float bias_correction2;
  float grad_scale;
};

// The reference's order of operations, in fp32.
__device__ __forceinline__ void adamw_element(float& p, float& m, float& v, float grad, bool decay,
                                              const AdamWConstants& c, const BlockFactors& f) {
  if (decay) p *= c.decay_factor;
  const float g = grad * f.grad_scale;
  m = c.beta1 * m + c.one_minus_beta1 * g;
  v = c.beta2 * v + c.one_minus_beta2 * g * g;
  const float m_hat = m / f.bias_correction1;
  const float v_hat = v / f.bias_correction2;
  p -= c.lr * m_hat / (sqrtf(v_hat) + c.eps);
}

__global__ void __launch_bounds__(kBlock)
    adamw_update(float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,
                 const float* __restrict__ grads, const std::uint8_t* __restrict__ decay_mask,
                 const float* __restrict__ grad_scale, const std::uint64_t* __restrict__ step,
                 std::size_t n, AdamWConstants c) {
  __shared__ BlockFactors shared;
  if (threadIdx.x == 0) {
    const double t = static_cast<double>(*step + 1);
    shared.bias_correction1 = static_cast<float>(1.0 - pow(c.beta1_exact, t));
    shared.bias_correction2 = static_cast<float>(1.0 - pow(c.beta2_exact, t));
    shared.grad_scale = grad_scale != nullptr ? *grad_scale : 1.0f;
  }
  __syncthreads();
  const BlockFactors f = shared;

  const std::size_t groups = n / 4;
  const std::size_t first = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  auto* p4 = reinterpret_cast<float4*>(params);
  auto* m4 = reinterpret_cast<float4*>(m);
  auto* v4 = reinterpret_cast<float4*>(v);
  const auto* g4 = reinterpret_cast<const float4*>(grads);
  const auto* k4 = reinterpret_cast<const uchar4*>(decay_mask);
  for (std::size_t i = first; i < groups; i += stride) {
    float4 p = p4[i], mm = m4[i], vv = v4[i];
    const float4 g = g4[i];
    const uchar4 k = k4[i];
    adamw_element(p.x, mm.x, vv.x, g.x, k.x != 0, c, f);
    adamw_element(p.y, mm.y, vv.y, g.y, k.y != 0, c, f);
    adamw_element(p.z, mm.z, vv.z, g.z, k.z != 0, c, f);
    adamw_element(p.w, mm.w, vv.w, g.w, k.w != 0, c, f);
    p4[i] = p;
    m4[i] = mm;
    v4[i] = vv;
  }
  const std::size_t tail = groups * 4 + first;
  if (tail < n)
    adamw_element(params[tail], m[tail], v[tail], grads[tail], decay_mask[tail] != 0, c, f);
}

__global__ void adamw_advance(std::uint64_t* step, float* grad_scale) {
  *step += 1;
  if (grad_scale != nullptr) *grad_scale = 1.0f;
}

void require_aligned(const void* ptr, std::size_t alignment, const char* name) {
  if (reinterpret_cast<std::uintptr_t>(ptr) % alignment != 0)
    throw Error("launch_adamw", "misaligned argument",
                std::string(name) + " must be " + std::to_string(alignment) + "-byte aligned",
                __FILE__, __LINE__);
}

}  // namespace

void launch_adamw(float* params, float* m, float* v, std::uint64_t* step, float* grad_scale,
                  const float* grads, const std::uint8_t* decay_mask, std::size_t n,
                  const AdamWConstants& constants, cudaStream_t stream) {
  const NvtxRange range("nn/adamw");
  if (n > 0) {
    require_aligned(params, 16, "params");
    require_aligned(m, 16, "m");
    require_aligned(v, 16, "v");
    require_aligned(grads, 16, "grads");
    require_aligned(decay_mask, 4, "decay_mask");
    const std::size_t threads = std::max<std::size_t>(n / 4, 1);
    const auto grid =
        static_cast<unsigned>(std::min<std::size_t>((threads + kBlock - 1) / kBlock, kMaxGrid));
    adamw_update<<<grid, kBlock, 0, stream>>>(params, m, v, grads, decay_mask, grad_scale, step, n,
                                              constants);
    RESIDENT_CHECK_LAUNCH("adamw_update");
  }
  adamw_advance<<<1, 1, 0, stream>>>(step, grad_scale);
  RESIDENT_CHECK_LAUNCH("adamw_advance");
}

}  // namespace resident::kernels
