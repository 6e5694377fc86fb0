// BiN forward and parameter backward (contract in bin_norm.h).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/tlob/bin_norm.h"

namespace resident::kernels::tlob {

namespace {

constexpr unsigned kThreads = 256;
constexpr std::size_t kMaxSide = 4096;
constexpr float kStdFloor = 1e-4f;

// Mean and floored unbiased std of n values at `stride`, two passes in index order.
__device__ void stats(const float* v, std::size_t n, std::size_t stride, float* mean, float* std) {
  float m = 0.0f;
  for (std::size_t i = 0; i < n; ++i) m += v[i * stride];
  m /= static_cast<float>(n);
  float ss = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    const float d = v[i * stride] - m;
    ss += d * d;
  }
  float s = sqrtf(ss / static_cast<float>(n - 1));
  if (s < kStdFloor) s = 1.0f;
  *mean = m;
  *std = s;
}

__global__ void __launch_bounds__(kThreads)
    bin_forward(float* xb, float* z1, float* z2, const float* x, BinParams p, std::size_t L,
                std::size_t F) {
  extern __shared__ float shared[];
  float* m1 = shared;        // [L] feature statistics per step
  float* s1 = m1 + L;
  float* m2 = s1 + L;        // [F] temporal statistics per feature
  float* s2 = m2 + F;
  const std::size_t n = L * F;
  const float* xs = x + blockIdx.x * n;
  for (std::size_t t = threadIdx.x; t < L; t += blockDim.x) stats(xs + t * F, F, 1, m1 + t, s1 + t);
  for (std::size_t f = threadIdx.x; f < F; f += blockDim.x) stats(xs + f, L, F, m2 + f, s2 + f);
  __syncthreads();
  const float y1 = *p.y1, y2 = *p.y2;
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) {
    const std::size_t t = i / F, f = i % F;
    const float a = (xs[i] - m1[t]) / s1[t];
    const float b = (xs[i] - m2[f]) / s2[f];
    z1[blockIdx.x * n + i] = a;
    z2[blockIdx.x * n + i] = b;
    xb[blockIdx.x * n + i] = y1 * (p.l1[t] * a + p.b1[t]) + y2 * (p.l2[f] * b + p.b2[f]);
  }
}

// partials row of sample b: [dl1 (L) | db1 (L) | dl2 (F) | db2 (F) | dy1 | dy2].
__global__ void __launch_bounds__(kThreads)
    bin_partials(float* partials, const float* dxb, const float* z1, const float* z2, BinParams p,
                 std::size_t L, std::size_t F) {
  __shared__ float red1[kThreads], red2[kThreads];
  const std::size_t n = L * F, width = 2 * L + 2 * F + 2;
  const float* g = dxb + blockIdx.x * n;
  const float* a = z1 + blockIdx.x * n;
  const float* b = z2 + blockIdx.x * n;
  float* out = partials + blockIdx.x * width;
  const float y1 = *p.y1, y2 = *p.y2;
  float sy1 = 0.0f, sy2 = 0.0f;
  for (std::size_t t = threadIdx.x; t < L; t += blockDim.x) {
    float dl = 0.0f, db = 0.0f, x1 = 0.0f;
    for (std::size_t f = 0; f < F; ++f) {
      const float gi = g[t * F + f];
      dl += gi * a[t * F + f];
      db += gi;
      x1 += gi * (p.l1[t] * a[t * F + f] + p.b1[t]);
    }
    out[t] = y1 * dl;
    out[L + t] = y1 * db;
    sy1 += x1;
  }
  for (std::size_t f = threadIdx.x; f < F; f += blockDim.x) {
    float dl = 0.0f, db = 0.0f, x2 = 0.0f;
    for (std::size_t t = 0; t < L; ++t) {
      const float gi = g[t * F + f];
      dl += gi * b[t * F + f];
      db += gi;
      x2 += gi * (p.l2[f] * b[t * F + f] + p.b2[f]);
    }
    out[2 * L + f] = y2 * dl;
    out[2 * L + F + f] = y2 * db;
    sy2 += x2;
  }
  red1[threadIdx.x] = sy1;
  red2[threadIdx.x] = sy2;
  __syncthreads();
  for (unsigned w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) {
      red1[threadIdx.x] += red1[threadIdx.x + w];
      red2[threadIdx.x] += red2[threadIdx.x + w];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    out[2 * L + 2 * F] = red1[0];
    out[2 * L + 2 * F + 1] = red2[0];
  }
}

__global__ void __launch_bounds__(kThreads)
    bin_reduce(BinGrads grads, const float* partials, std::size_t batch, std::size_t L,
               std::size_t F, bool accumulate) {
  const std::size_t width = 2 * L + 2 * F + 2;
  const std::size_t c = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (c >= width) return;
  float sum = 0.0f;
  for (std::size_t b = 0; b < batch; ++b) sum += partials[b * width + c];
  float* target = c < L           ? grads.l1 + c
                  : c < 2 * L     ? grads.b1 + (c - L)
                  : c < 2 * L + F ? grads.l2 + (c - 2 * L)
                  : c < 2 * L + 2 * F ? grads.b2 + (c - 2 * L - F)
                  : c == 2 * L + 2 * F ? grads.y1
                                       : grads.y2;
  *target = accumulate ? *target + sum : sum;
}

void check(const char* call, std::size_t batch, std::size_t L, std::size_t F) {
  if (batch == 0 || L < 2 || F < 2 || L > kMaxSide || F > kMaxSide)
    throw Error(call, "invalid argument",
                "batch = " + std::to_string(batch) + ", window = " + std::to_string(L) +
                    ", features = " + std::to_string(F) +
                    "; allowed batch >= 1, window and features in [2, 4096]",
                __FILE__, __LINE__);
}

}  // namespace

std::size_t bin_partials_floats(std::size_t batch, std::size_t window, std::size_t features) {
  return batch * (2 * window + 2 * features + 2);
}

void launch_bin_forward(float* xb, float* z1, float* z2, const float* x, const BinParams& params,
                        std::size_t batch, std::size_t window, std::size_t features,
                        cudaStream_t stream) {
  check("launch_bin_forward", batch, window, features);
  const NvtxRange range("tlob/bin_forward");
  const std::size_t shared = 2 * (window + features) * sizeof(float);
  bin_forward<<<static_cast<unsigned>(batch), kThreads, shared, stream>>>(xb, z1, z2, x, params,
                                                                          window, features);
  RESIDENT_CHECK_LAUNCH("bin_forward");
}

void launch_bin_backward(const BinGrads& grads, float* partials, const float* dxb, const float* z1,
                         const float* z2, const BinParams& params, std::size_t batch,
                         std::size_t window, std::size_t features, nn::GradMode mode,
                         cudaStream_t stream) {
  check("launch_bin_backward", batch, window, features);
  const NvtxRange range("tlob/bin_backward");
  bin_partials<<<static_cast<unsigned>(batch), kThreads, 0, stream>>>(partials, dxb, z1, z2,
                                                                      params, window, features);
  RESIDENT_CHECK_LAUNCH("bin_partials");
  const std::size_t width = 2 * window + 2 * features + 2;
  bin_reduce<<<static_cast<unsigned>((width + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      grads, partials, batch, window, features, mode == nn::GradMode::Accumulate);
  RESIDENT_CHECK_LAUNCH("bin_reduce");
}

}  // namespace resident::kernels::tlob
