// The sampler's fused residual block and its weight transpose (contracts in
// diffusion_fused_block.h, block programs in diffusion_fused_block.cuh).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/diffusion/diffusion_fused_block.cuh"

namespace resident::kernels::diffusion {

namespace {

__global__ void __launch_bounds__(kFusedBlockThreads) diffusion_fused_block(FusedBlockArgs args) {
  extern __shared__ float4 shared4[];
  DeviceBlock block{blockIdx.x, blockDim.x};
  fused_block_program(block, args, reinterpret_cast<float*>(shared4));
}

__global__ void __launch_bounds__(kFusedWeightsThreads)
    diffusion_fused_weights(FusedWeightsArgs args) {
  __shared__ float tile[kFusedTile * (kFusedTile + 1)];
  DeviceBlock block{blockIdx.x, blockDim.x};
  fused_weights_program(block, args, tile);
}

std::size_t shared_bytes(std::size_t width) {
  return static_cast<std::size_t>(fused_block_shared_floats(static_cast<int>(width))) *
         sizeof(float);
}

}  // namespace

void check_diffusion_fused_block_width(const char* call, std::size_t width) {
  if (width < 1 || width > kFusedBlockMaxWidth)
    throw Error(call, "invalid argument",
                "width = " + std::to_string(width) + ", allowed [1, " +
                    std::to_string(kFusedBlockMaxWidth) + "] (the fused sampler block)",
                __FILE__, __LINE__);
}

void prepare_diffusion_fused_block_kernel() {
  RESIDENT_CUDA_CHECK(cudaFuncSetAttribute(diffusion_fused_block,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(shared_bytes(kFusedBlockMaxWidth))));
}

void launch_diffusion_fused_weights(float* wt, const float* const* w, std::size_t matrices,
                                    std::size_t width, cudaStream_t stream) {
  constexpr const char* kOp = "launch_diffusion_fused_weights";
  check_diffusion_fused_block_width(kOp, width);
  if (matrices < 1 || matrices > kFusedBlockMaxMatrices)
    throw Error(kOp, "invalid argument",
                "matrices = " + std::to_string(matrices) + ", allowed [1, " +
                    std::to_string(kFusedBlockMaxMatrices) + "]",
                __FILE__, __LINE__);
  const NvtxRange range("diffusion/fused_weights");
  FusedWeightsArgs args{};
  args.wt = wt;
  for (std::size_t m = 0; m < matrices; ++m) args.w[m] = w[m];
  args.matrices = static_cast<int>(matrices);
  args.width = static_cast<int>(width);
  const int tiles = fused_weights_tiles(args.width);
  const auto blocks = static_cast<unsigned>(matrices) * static_cast<unsigned>(tiles * tiles);
  diffusion_fused_weights<<<blocks, kFusedWeightsThreads, 0, stream>>>(args);
  RESIDENT_CHECK_LAUNCH("diffusion_fused_weights");
}

void launch_diffusion_fused_block(float* h, const float* gamma, const float* beta,
                                  const float* w1t, const float* b1, const float* temb,
                                  const float* w2t, const float* b2, std::size_t rows,
                                  std::size_t width, float eps, cudaStream_t stream) {
  constexpr const char* kOp = "launch_diffusion_fused_block";
  check_diffusion_fused_block_width(kOp, width);
  if (rows > (std::size_t{1} << 34))
    throw Error(kOp, "invalid argument",
                "rows = " + std::to_string(rows) + ", allowed at most 2^34", __FILE__, __LINE__);
  if (!(eps > 0.0f))
    throw Error(kOp, "invalid argument", "eps = " + std::to_string(eps) + ", must be > 0",
                __FILE__, __LINE__);
  if (rows == 0) return;
  const NvtxRange range("diffusion/fused_block");
  const FusedBlockArgs args{h,  gamma, beta, w1t, b1, temb, w2t, b2, static_cast<long long>(rows),
                            static_cast<int>(width), eps};
  const auto blocks = static_cast<unsigned>(fused_block_ctas(args.rows));
  diffusion_fused_block<<<blocks, kFusedBlockThreads, shared_bytes(width), stream>>>(args);
  RESIDENT_CHECK_LAUNCH("diffusion_fused_block");
}

}  // namespace resident::kernels::diffusion
