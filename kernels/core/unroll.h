// RESIDENT_UNROLL: `#pragma unroll` in nvcc's device pass only, for __host__ __device__ code
// that the host pass also compiles (where the pragma is unknown and -Werror rejects it).
#pragma once

#if defined(__CUDA_ARCH__)
#define RESIDENT_UNROLL _Pragma("unroll")
#else
#define RESIDENT_UNROLL
#endif

// RESIDENT_UNROLL_BY(n): `#pragma unroll n`, device pass only.
#if defined(__CUDA_ARCH__)
#define RESIDENT_PRAGMA(x) _Pragma(#x)
#define RESIDENT_UNROLL_BY(n) RESIDENT_PRAGMA(unroll n)
#else
#define RESIDENT_UNROLL_BY(n)
#endif
