// Block programs: a kernel body written once as a sequence of phases, run by a CUDA block on
// the GPU (DeviceBlock) and emulated on the host (HostBlock) so the CPU tests execute the very
// code the GPU runs.
//
// A body is a template `template <class Block> RESIDENT_HD void body(Block& block, ...)` that
// calls block.phase(f) one or more times. f(tid) runs for every tid in [0, block.threads); a
// phase ends with a barrier (__syncthreads on the GPU; on the host every thread of the phase
// has finished before the next phase starts). Rules that keep both executions the same:
//   - state that lives across phases is in shared memory (the `smem` the body receives) or in
//     global memory, never in a variable local to f;
//   - within a phase, threads write disjoint locations and read only what earlier phases wrote
//     (or what they themselves wrote in this phase);
//   - block.index is the block's linear index in the grid.
#pragma once

#include <cuda_runtime.h>

#define RESIDENT_HD __host__ __device__

namespace resident::kernels::mamba2 {

struct DeviceBlock {
  unsigned index;
  unsigned threads;

  template <class F>
  RESIDENT_HD void phase(F&& f) {
#ifdef __CUDA_ARCH__
    f(threadIdx.x);
    __syncthreads();
#else
    (void)f;
#endif
  }
};

struct HostBlock {
  unsigned index;
  unsigned threads;

  template <class F>
  RESIDENT_HD void phase(F&& f) {
#ifndef __CUDA_ARCH__
    for (unsigned tid = 0; tid < threads; ++tid) f(tid);
#else
    (void)f;
#endif
  }
};

RESIDENT_HD inline float sigmoid_f(float v) { return 1.0f / (1.0f + expf(-v)); }
RESIDENT_HD inline float silu_f(float v) { return v * sigmoid_f(v); }
RESIDENT_HD inline float silu_grad_f(float v) {
  const float s = sigmoid_f(v);
  return s * (1.0f + v * (1.0f - s));
}
// PyTorch's softplus (beta 1, threshold 20) and its derivative.
RESIDENT_HD inline float softplus_f(float v) { return v > 20.0f ? v : log1pf(expf(v)); }
RESIDENT_HD inline float softplus_grad_f(float v) { return v > 20.0f ? 1.0f : sigmoid_f(v); }

}  // namespace resident::kernels::mamba2
