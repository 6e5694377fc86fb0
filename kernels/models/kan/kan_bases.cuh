// Device evaluation of a KAN input: the squash, SiLU and its derivative, and the k + 1 B-spline
// bases (and derivatives) that are non-zero at a point of the uniform extended grid
// (kan_layout.h's Grid; MODELS.md section 4). fp32 math; host-callable too, so a CPU test checks
// these exact functions against the double reference.
//
// For the uniform knots t_m = lo + (m - k) h, with s = (u - t_0) / h, j = floor(s), f = s - j
// (t_j <= u < t_{j+1}), the bases non-zero at u are m = j - k + r, r = 0..k, and the Cox-de Boor
// recursion in local coordinates reads, for p = 1..k and r = p..0,
//   b_p[r] = ((f + p - r) b_{p-1}[r-1] + (r + 1 - f) b_{p-1}[r]) / p,   b_0[0] = 1,
// (b_{p-1}[-1] = b_{p-1}[p] = 0) and the derivative
//   B'_{j-k+r} = (b_{k-1}[r-1] - b_{k-1}[r]) / h.
// A u outside [t_0, t_{G+2k}) has no non-zero basis (first = the sentinel kNoBasis).
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#include "kernels/core/unroll.h"
#include "kernels/models/kan/kan_layout.h"


namespace resident::kernels::kan {

inline constexpr int kNoBasis = -(1 << 20);

__host__ __device__ inline float squash(float th, const Grid& g) { return g.mid + g.half * th; }

// silu(u) = u sigmoid(u), and silu'(u) = sigmoid(u) (1 + u (1 - sigmoid(u))), with the
// sigmoid and its complement from one expf that cannot overflow.
__host__ __device__ inline float silu(float u) {
  const float e = expf(-fabsf(u));
  const float sig = u >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
  return u * sig;
}

__host__ __device__ inline float silu_derivative(float u) {
  const float e = expf(-fabsf(u));
  const float large = 1.0f / (1.0f + e), small = e * large;
  const float sig = u >= 0.0f ? large : small, complement = u >= 0.0f ? small : large;
  return sig * (1.0f + u * complement);
}

// The k + 1 bases non-zero at u: value[r] = B_{first + r}(u); first may be negative or first + r
// past the last basis (G + k - 1) near the ends: the caller keeps 0 <= first + r < G + k. With
// `derivative` non-null it also gets B'_{first + r}(u).
template <int kOrder>
__host__ __device__ inline int local_bases(float u, const Grid& g, float (&value)[kOrder + 1],
                                  float (*derivative)[kOrder + 1]) {
  const float s = (u - g.grid_min) * g.inv_h + static_cast<float>(kOrder);
  const float j = floorf(s);
  const int intervals = g.grid_size + 2 * kOrder;
  if (!(j >= 0.0f && j < static_cast<float>(intervals))) {  // also rejects NaN
RESIDENT_UNROLL
    for (int r = 0; r <= kOrder; ++r) {
      value[r] = 0.0f;
      if (derivative != nullptr) (*derivative)[r] = 0.0f;
    }
    return kNoBasis;
  }
  const float f = s - j;
  value[0] = 1.0f;
RESIDENT_UNROLL
  for (int r = 1; r <= kOrder; ++r) value[r] = 0.0f;
RESIDENT_UNROLL
  for (int p = 1; p <= kOrder; ++p) {
    if (p == kOrder && derivative != nullptr) {
RESIDENT_UNROLL
      for (int r = 0; r <= kOrder; ++r) {
        const float left = r > 0 ? value[r - 1] : 0.0f;
        const float right = r < kOrder ? value[r] : 0.0f;  // value[kOrder] is 0 at p - 1
        (*derivative)[r] = (left - right) * g.inv_h;
      }
    }
    const float inv_p = 1.0f / static_cast<float>(p);
RESIDENT_UNROLL
    for (int r = p; r >= 0; --r) {
      const float left = r > 0 ? value[r - 1] : 0.0f;
      value[r] = ((f + static_cast<float>(p - r)) * left +
                  (static_cast<float>(r + 1) - f) * value[r]) * inv_p;
    }
  }
  return static_cast<int>(j) - kOrder;
}

}  // namespace resident::kernels::kan
