// Programmatic dependent launch (sm_90; include from .cu files only). A kernel launched by
// launch_after_prior may have its blocks scheduled before the previous kernel of its stream has
// finished (once every block of that kernel called allow_next_kernel_to_start, or exited), so
// its launch latency hides behind that kernel's tail. The contract of such a kernel: every
// thread calls wait_for_prior_kernel before its first global memory access, read or write (so
// it neither reads unfinished results nor overwrites what the previous kernel still reads), and
// it finishes only after that wait (so a kernel after it may rely on everything before it).
// Without the launch attribute (programmatic launches off, or a launch by other means) both
// device calls are no-ops and the launch is an ordinary stream-ordered one. Device code must be
// compiled for sm_90 or newer: below it the waits would compile to nothing while the host still
// asks for overlap (a race), so that is a compile error.
#pragma once

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "kernels/core/programmatic_launch.cuh needs sm_90 or newer device code (griddepcontrol)"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "kernels/core/error.h"
#include "kernels/core/programmatic_launch.h"

namespace resident::kernels {

// Returns once the previous kernel of the stream has completed and its writes are visible.
__device__ __forceinline__ void wait_for_prior_kernel() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

// Lets the next kernel of the stream, when launched by launch_after_prior, schedule its blocks
// (they wait in wait_for_prior_kernel until this kernel completes). Publishes nothing: call it
// early.
__device__ __forceinline__ void allow_next_kernel_to_start() {
  asm volatile("griddepcontrol.launch_dependents;" :::);
}

struct LaunchShape {
  dim3 grid;
  dim3 block;
  std::size_t dynamic_shared_bytes = 0;
  // Grid barriers: every block co-resident (cudaLaunchAttributeCooperative). Such a launch
  // measured stream-ordered on the H200 even with the programmatic attribute (it starts once
  // the previous kernel completes); its waits are then no-ops.
  bool cooperative = false;
  // > 0: thread-block clusters of this many blocks along x (cudaLaunchAttributeClusterDimension;
  // grid.x must be a multiple of it, at most 8 for a portable size). Unlike a cooperative launch,
  // a cluster launch keeps the programmatic attribute's early start.
  unsigned cluster_blocks = 0;
};

// kernel<<<shape>>>(args) on `stream`, with the programmatic-serialization attribute when
// programmatic_launches_enabled(). A launch error throws resident::Error naming
// cudaLaunchKernelEx.
template <typename... KernelArgs, typename... Args>
void launch_after_prior(const LaunchShape& shape, cudaStream_t stream,
                        void (*kernel)(KernelArgs...), Args&&... args) {
  cudaLaunchAttribute attributes[3]{};
  unsigned count = 0;
  if (programmatic_launches_enabled()) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  if (shape.cooperative) {
    attributes[count].id = cudaLaunchAttributeCooperative;
    attributes[count].val.cooperative = 1;
    ++count;
  }
  if (shape.cluster_blocks > 0) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = shape.cluster_blocks;
    attributes[count].val.clusterDim.y = 1;
    attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = shape.grid;
  config.blockDim = shape.block;
  config.dynamicSmemBytes = shape.dynamic_shared_bytes;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = count;
  RESIDENT_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace resident::kernels
