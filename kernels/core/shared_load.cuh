// load4_shared(p, v): four consecutive floats at p into v, as one 16-byte load on the GPU
// (p must be 16-byte aligned there: shared memory laid out for it) and four plain loads on the
// host, where block programs run in CPU tests. Same values either way.
#pragma once

#include <cuda_runtime.h>

namespace resident::kernels {

__host__ __device__ inline void load4_shared(const float* p, float (&v)[4]) {
#ifdef __CUDA_ARCH__
  const float4 q = *reinterpret_cast<const float4*>(p);
  v[0] = q.x;
  v[1] = q.y;
  v[2] = q.z;
  v[3] = q.w;
#else
  v[0] = p[0];
  v[1] = p[1];
  v[2] = p[2];
  v[3] = p[3];
#endif
}

}  // namespace resident::kernels
