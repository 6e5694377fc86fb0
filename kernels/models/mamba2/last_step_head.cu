// Kernels and launchers of the last-step head (contract in last_step_head.h).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/mamba2/last_step_head.cuh"

namespace resident::kernels::mamba2 {

namespace {

__global__ void __launch_bounds__(kHeadThreads)
    last_step_head_forward_kernel(LastStepHeadForwardArgs args) {
  extern __shared__ float smem[];
  DeviceBlock block{blockIdx.x, blockDim.x};
  last_step_head_forward_block(block, args, smem);
}

__global__ void __launch_bounds__(kHeadThreads)
    last_step_head_backward_kernel(LastStepHeadBackwardArgs args) {
  extern __shared__ float smem[];
  DeviceBlock block{blockIdx.x, blockDim.x};
  last_step_head_backward_block(block, args, smem);
}

void check_shape(const char* call, int batch, int length, int d_model, int outputs) {
  if (batch < 1 || length < 1 || d_model < 1 || outputs < 1 || d_model > 4096)
    throw Error(call, "invalid shape",
                "batch " + std::to_string(batch) + ", length " + std::to_string(length) +
                    ", d_model " + std::to_string(d_model) + " (<= 4096), outputs " +
                    std::to_string(outputs),
                __FILE__, __LINE__);
}

}  // namespace

void launch_last_step_head_forward(const LastStepHeadForwardArgs& args, cudaStream_t stream) {
  check_shape("launch_last_step_head_forward", args.batch, args.length, args.d_model, args.outputs);
  NvtxRange range("mamba2::last_step_head_forward");
  const std::size_t bytes = sizeof(float) * last_step_head_shared_floats(args.d_model);
  last_step_head_forward_kernel<<<args.batch, kHeadThreads, bytes, stream>>>(args);
  RESIDENT_CHECK_LAUNCH("last_step_head_forward_kernel");
}

void launch_last_step_head_backward(const LastStepHeadBackwardArgs& args, cudaStream_t stream) {
  check_shape("launch_last_step_head_backward", args.batch, args.length, args.d_model,
              args.outputs);
  NvtxRange range("mamba2::last_step_head_backward");
  const std::size_t bytes = sizeof(float) * last_step_head_shared_floats(args.d_model);
  last_step_head_backward_kernel<<<args.batch, kHeadThreads, bytes, stream>>>(args);
  RESIDENT_CHECK_LAUNCH("last_step_head_backward_kernel");
}

}  // namespace resident::kernels::mamba2
