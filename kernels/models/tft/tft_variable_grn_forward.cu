// TFT's fused per-variable GRNs, forward (contract in tft_variable_grn.h, block program in
// tft_variable_grn.cuh).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/tft/tft_variable_grn.cuh"

namespace resident::kernels::tft {

namespace {

__global__ void __launch_bounds__(kVgrnRows) variable_grn_forward(VgrnForwardArgs args) {
  extern __shared__ float4 shared4[];
  DeviceBlock block{blockIdx.x, blockDim.x};
  vgrn_forward_block(block, args, reinterpret_cast<float*>(shared4));
}

std::size_t shared_bytes(std::size_t hidden, std::size_t prescale) {
  return static_cast<std::size_t>(vgrn_forward_shared_floats(static_cast<int>(hidden),
                                                             static_cast<int>(prescale))) *
         sizeof(float);
}

}  // namespace

void check_variable_grn_sizes(const char* call, std::size_t rows, std::size_t features,
                              std::size_t hidden, std::size_t prescale) {
  const auto range = [&](const char* field, std::size_t value, std::size_t high) {
    if (value < 1 || value > high)
      throw Error(call, "invalid argument",
                  std::string(field) + " = " + std::to_string(value) + ", allowed [1, " +
                      std::to_string(high) + "]",
                  __FILE__, __LINE__);
  };
  range("hidden", hidden, kVariableGrnMaxHidden);
  range("prescale", prescale, kVariableGrnMaxPrescale);
  range("features", features, 1u << 16);
  range("rows", rows, std::size_t{1} << 40);
  const std::size_t blocks = static_cast<std::size_t>(vgrn_chunks(static_cast<long long>(rows))) *
                             features;
  if (blocks > 2147483647u)
    throw Error(call, "invalid argument",
                "rows = " + std::to_string(rows) + ", features = " + std::to_string(features) +
                    ": " + std::to_string(blocks) + " blocks, allowed at most 2^31 - 1",
                __FILE__, __LINE__);
}

void prepare_variable_grn_forward_kernel() {
  RESIDENT_CUDA_CHECK(cudaFuncSetAttribute(
      variable_grn_forward, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(shared_bytes(kVariableGrnMaxHidden, kVariableGrnMaxPrescale))));
}

void launch_variable_grn_forward(float* xhat, const float* e, const VgrnWeights& weights,
                                 std::size_t rows, std::size_t features, std::size_t hidden,
                                 std::size_t prescale, float eps, cudaStream_t stream) {
  check_variable_grn_sizes("launch_variable_grn_forward", rows, features, hidden, prescale);
  const NvtxRange range("tft/variable_grn_forward");
  const VgrnForwardArgs args{xhat, e, weights, vgrn_sizes(rows, features, hidden, prescale, eps)};
  const auto blocks = static_cast<unsigned>(vgrn_chunks(args.size.rows) * args.size.features);
  variable_grn_forward<<<blocks, kVgrnRows, shared_bytes(hidden, prescale), stream>>>(args);
  RESIDENT_CHECK_LAUNCH("variable_grn_forward");
}

}  // namespace resident::kernels::tft
