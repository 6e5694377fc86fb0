// Fused bias + activation (bias_activation.h). Forward: one grid-stride thread per element.
// Backward: the column-tile traversal of launch_bias_grad (column_tile_sum.cuh), each thread
// writing dz for the elements it adds, so da and z are read once and dz written once.
#include "kernels/nn/bias_activation.h"

#include "kernels/core/launch_config.h"
#include "kernels/nn/activation_math.cuh"
#include "kernels/nn/column_tile_sum.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

template <ActivationKind Kind>
__global__ void bias_activation_forward(float* __restrict__ z, float* __restrict__ y,
                                        const float* __restrict__ bias, std::size_t rows,
                                        std::size_t cols, Activation a) {
  const std::size_t total = rows * cols;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < total;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const float pre = z[i] + bias[i % cols];
    z[i] = pre;
    y[i] = activation_math::value<Kind>(pre, a);
  }
}

// dz = da * f'(z), read and written element by element (dz may alias da); `z` holds y = f(z)
// when from_output.
template <ActivationKind Kind>
struct ActivationGradient {
  float* dz;
  const float* z;
  const float* da;
  std::size_t cols;
  Activation a;
  bool from_output;
  struct Loaded {
    float z, da;
  };
  __device__ Loaded load(std::size_t r, std::size_t c) const {
    const std::size_t i = r * cols + c;
    return {z[i], da[i]};
  }
  __device__ float apply(std::size_t r, std::size_t c, Loaded v) const {
    const float g = v.da * (from_output ? activation_math::derivative_from_output<Kind>(v.z)
                                        : activation_math::derivative<Kind>(v.z, a));
    dz[r * cols + c] = g;
    return g;
  }
};

template <ActivationKind Kind>
__global__ void __launch_bounds__(column_tile::kThreads)
    activation_backward_bias_grad(float* dz, float* dbias, const float* z, const float* da,
                                  std::size_t rows, std::size_t cols, unsigned width,
                                  Activation a, bool accumulate, bool from_output) {
  std::size_t c = 0;
  const float sum = column_tile::sum_block_columns(
      rows, cols, width, ActivationGradient<Kind>{dz, z, da, cols, a, from_output}, c);
  if (threadIdx.x < width && c < cols && blockIdx.y == 0)
    rowwise::write_grad(dbias + c, sum, accumulate);
}

constexpr unsigned kBlock = 256;

}  // namespace

void launch_bias_activation_forward(float* z, float* y, const float* bias, std::size_t rows,
                                    std::size_t cols, const Activation& activation,
                                    cudaStream_t stream) {
  const NvtxRange range("nn/bias_activation_forward");
  activation_math::dispatch(activation, "bias_activation_forward", [&](auto kind) {
    if (rows == 0 || cols == 0) return;
    bias_activation_forward<decltype(kind)::value>
        <<<grid_stride_blocks(rows * cols, kBlock), kBlock, 0, stream>>>(z, y, bias, rows, cols,
                                                                         activation);
    RESIDENT_CHECK_LAUNCH("bias_activation_forward");
  });
}

void launch_activation_backward_bias_grad(float* dz, float* dbias, const float* z, const float* da,
                                          std::size_t rows, std::size_t cols,
                                          const Activation& activation, nn::GradMode mode,
                                          cudaStream_t stream, SavedActivation saved) {
  const NvtxRange range("nn/activation_backward_bias_grad");
  const bool from_output = saved == SavedActivation::Output;
  if (from_output && !derivative_from_output_exact(activation.kind))
    throw Error("launch_activation_backward_bias_grad", "invalid argument",
                "saved = Output needs a ReLU or tanh activation (kind " +
                    std::to_string(static_cast<int>(activation.kind)) + ")",
                __FILE__, __LINE__);
  activation_math::dispatch(activation, "activation_backward_bias_grad", [&](auto kind) {
    if (cols == 0) return;
    const column_tile::Shape tile = column_tile::shape_for(rows, cols);
    column_tile::launch(tile, stream, activation_backward_bias_grad<decltype(kind)::value>, dz,
                        dbias, z, da, rows, cols, tile.width, activation,
                        mode == nn::GradMode::Accumulate, from_output);
  });
}

}  // namespace resident::kernels
