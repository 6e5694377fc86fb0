// Kernels and launchers of the Mamba2 row norms (contracts in row_norms.h, bodies in
// row_norms.cuh).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/mamba2/row_norms.cuh"

namespace resident::kernels::mamba2 {

namespace {

__global__ void __launch_bounds__(kNormThreads)
    residual_rms_norm_forward_kernel(ResidualRmsNormForwardArgs args) {
  __shared__ float smem[kNormSharedFloats];
  DeviceBlock block{blockIdx.x, blockDim.x};
  residual_rms_norm_forward_block(block, args, smem);
}

__global__ void __launch_bounds__(kNormThreads)
    residual_rms_norm_backward_kernel(ResidualRmsNormBackwardArgs args) {
  __shared__ float smem[kNormSharedFloats];
  DeviceBlock block{blockIdx.x, blockDim.x};
  residual_rms_norm_backward_block(block, args, smem);
}

__global__ void __launch_bounds__(kNormThreads)
    gated_rms_norm_forward_kernel(GatedRmsNormForwardArgs args) {
  __shared__ float smem[kNormSharedFloats];
  DeviceBlock block{blockIdx.x, blockDim.x};
  gated_rms_norm_forward_block(block, args, smem);
}

__global__ void __launch_bounds__(kNormThreads)
    gated_rms_norm_backward_kernel(GatedRmsNormBackwardArgs args) {
  __shared__ float smem[kNormSharedFloats];
  DeviceBlock block{blockIdx.x, blockDim.x};
  gated_rms_norm_backward_block(block, args, smem);
}

void check_shape(const char* call, int rows, int cols) {
  if (rows < 1 || cols < 1)
    throw Error(call, "invalid shape",
                "rows = " + std::to_string(rows) + ", cols = " + std::to_string(cols) +
                    "; both must be >= 1",
                __FILE__, __LINE__);
}

}  // namespace

void launch_residual_rms_norm_forward(const ResidualRmsNormForwardArgs& args,
                                      cudaStream_t stream) {
  check_shape("launch_residual_rms_norm_forward", args.rows, args.cols);
  NvtxRange range("mamba2::residual_rms_norm_forward");
  residual_rms_norm_forward_kernel<<<norm_blocks(args.rows), kNormThreads, 0, stream>>>(args);
  RESIDENT_CHECK_LAUNCH("residual_rms_norm_forward_kernel");
}

void launch_residual_rms_norm_backward(const ResidualRmsNormBackwardArgs& args,
                                       cudaStream_t stream) {
  check_shape("launch_residual_rms_norm_backward", args.rows, args.cols);
  NvtxRange range("mamba2::residual_rms_norm_backward");
  residual_rms_norm_backward_kernel<<<norm_blocks(args.rows), kNormThreads, 0, stream>>>(args);
  RESIDENT_CHECK_LAUNCH("residual_rms_norm_backward_kernel");
}

void launch_gated_rms_norm_forward(const GatedRmsNormForwardArgs& args, cudaStream_t stream) {
  check_shape("launch_gated_rms_norm_forward", args.rows, args.cols);
  NvtxRange range("mamba2::gated_rms_norm_forward");
  gated_rms_norm_forward_kernel<<<norm_blocks(args.rows), kNormThreads, 0, stream>>>(args);
  RESIDENT_CHECK_LAUNCH("gated_rms_norm_forward_kernel");
}

void launch_gated_rms_norm_backward(const GatedRmsNormBackwardArgs& args, cudaStream_t stream) {
  check_shape("launch_gated_rms_norm_backward", args.rows, args.cols);
  NvtxRange range("mamba2::gated_rms_norm_backward");
  gated_rms_norm_backward_kernel<<<norm_blocks(args.rows), kNormThreads, 0, stream>>>(args);
  RESIDENT_CHECK_LAUNCH("gated_rms_norm_backward_kernel");
}

}  // namespace resident::kernels::mamba2
