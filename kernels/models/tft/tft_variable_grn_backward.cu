// TFT's fused per-variable GRNs, backward and the fixed-order reduction of its per-chunk
// parameter gradients (contract in tft_variable_grn.h, block programs in tft_variable_grn.cuh).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/tft/tft_variable_grn.cuh"

namespace resident::kernels::tft {

void prepare_variable_grn_forward_kernel();  // tft_variable_grn_forward.cu

namespace {

constexpr unsigned kReduceThreads = 256;

__global__ void __launch_bounds__(kVgrnRows) variable_grn_backward(VgrnBackwardArgs args) {
  extern __shared__ float4 shared4[];
  DeviceBlock block{blockIdx.x, blockDim.x};
  vgrn_backward_block(block, args, reinterpret_cast<float*>(shared4));
}

__global__ void __launch_bounds__(kReduceThreads)
    variable_grn_reduce(VgrnReduceArgs args, long long n) {
  const VgrnLayout l = vgrn_layout(args.hidden, args.prescale);
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    vgrn_reduce_element(args, l, i);
}

std::size_t shared_bytes(std::size_t hidden, std::size_t prescale) {
  return static_cast<std::size_t>(vgrn_backward_shared_floats(static_cast<int>(hidden),
                                                              static_cast<int>(prescale))) *
         sizeof(float);
}

}  // namespace

void prepare_variable_grn_kernels() {
  prepare_variable_grn_forward_kernel();
  RESIDENT_CUDA_CHECK(cudaFuncSetAttribute(
      variable_grn_backward, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(shared_bytes(kVariableGrnMaxHidden, kVariableGrnMaxPrescale))));
}

std::size_t variable_grn_partials_floats(std::size_t rows, std::size_t features,
                                         std::size_t hidden, std::size_t prescale) {
  check_variable_grn_sizes("variable_grn_partials_floats", rows, features, hidden, prescale);
  const VgrnLayout l = vgrn_layout(static_cast<int>(hidden), static_cast<int>(prescale));
  return static_cast<std::size_t>(vgrn_chunks(static_cast<long long>(rows))) * features *
         static_cast<std::size_t>(l.params);
}

void launch_variable_grn_backward(float* de, const VgrnGrads& grads, float* partials,
                                  std::size_t partials_floats, const float* dxhat, const float* e,
                                  const VgrnWeights& weights, std::size_t rows,
                                  std::size_t features, std::size_t hidden, std::size_t prescale,
                                  float eps, cudaStream_t stream) {
  const char* call = "launch_variable_grn_backward";
  check_variable_grn_sizes(call, rows, features, hidden, prescale);
  const std::size_t need = variable_grn_partials_floats(rows, features, hidden, prescale);
  if (partials == nullptr || partials_floats < need)
    throw Error(call, "invalid argument",
                "partials_floats = " + std::to_string(partials_floats) + ", allowed >= " +
                    std::to_string(need) + " (variable_grn_partials_floats)",
                __FILE__, __LINE__);
  const NvtxRange range("tft/variable_grn_backward");
  const VgrnSizes size = vgrn_sizes(rows, features, hidden, prescale, eps);
  const VgrnBackwardArgs args{de, partials, dxhat, e, weights, size};
  const long long chunks = vgrn_chunks(size.rows);
  const auto blocks = static_cast<unsigned>(chunks * size.features);
  variable_grn_backward<<<blocks, kVgrnRows, shared_bytes(hidden, prescale), stream>>>(args);
  RESIDENT_CHECK_LAUNCH("variable_grn_backward");
  const VgrnReduceArgs reduce{grads, partials, chunks, size.features, size.hidden, size.prescale};
  const VgrnLayout l = vgrn_layout(size.hidden, size.prescale);
  const auto n = static_cast<long long>(features) * l.params;
  variable_grn_reduce<<<grid_stride_blocks(static_cast<std::size_t>(n), kReduceThreads),
                        kReduceThreads, 0, stream>>>(reduce, n);
  RESIDENT_CHECK_LAUNCH("variable_grn_reduce");
}

}  // namespace resident::kernels::tft
