// Device math of the CfC cell shared by the step kernels: the LeCun tanh and its derivative from
// the saved output.
#pragma once

namespace resident::kernels::cfc {

inline constexpr float kLecunScale = 1.7159f;
inline constexpr float kLecunSlope = 0.666f;

__host__ __device__ inline float lecun_tanh(float p) {
  return kLecunScale * tanhf(kLecunSlope * p);
}

// d lecun_tanh / dp from z = lecun_tanh(p): scale * slope * (1 - (z / scale)^2).
__host__ __device__ inline float lecun_derivative_from_output(float z) {
  const float t = z / kLecunScale;
  return kLecunScale * kLecunSlope * (1.0f - t * t);
}

__host__ __device__ inline float cfc_sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

}  // namespace resident::kernels::cfc
