// Dropout forward and backward. Forward: one grid-stride thread per group of four consecutive
// elements; group g draws one Philox block (four 32-bit words) from subsequence g of the key and
// decides its four elements, writing y and the uint8 keep mask. Backward: one grid-stride
// thread per element, from the saved mask (no random numbers). fp32, deterministic.
#include <algorithm>
#include <string>

#include "kernels/core/philox.cuh"
#include "kernels/nn/dropout.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

__global__ void dropout_forward(float* y, std::uint8_t* keep_mask, const float* x, std::size_t n,
                                PhiloxKey key, std::uint64_t threshold, float scale) {
  const std::size_t groups = (n + 3) / 4;
  for (std::size_t g = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; g < groups;
       g += std::size_t{gridDim.x} * blockDim.x) {
    curandStatePhilox4_32_10_t state = philox_state(key, g);
    const uint4 draws = curand4(&state);  // draws 0..3 of subsequence g, in stream order
    const std::uint32_t words[4] = {draws.x, draws.y, draws.z, draws.w};
    for (int j = 0; j < 4; ++j) {
      const std::size_t i = 4 * g + j;
      if (i >= n) break;
      const bool keep = std::uint64_t{words[j]} < threshold;
      keep_mask[i] = keep ? 1 : 0;
      y[i] = keep ? x[i] * scale : 0.0f;
    }
  }
}

__global__ void dropout_backward(float* dx, const std::uint8_t* keep_mask, const float* dy,
                                 std::size_t n, float scale, bool accumulate) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const float g = keep_mask[i] != 0 ? dy[i] * scale : 0.0f;
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

constexpr unsigned kBlock = 256;

// The fp32 scale 1 / keep_probability, after checking keep_probability in (0, 1].
float checked_scale(float keep_probability, const char* op) {
  if (!(keep_probability > 0.0f && keep_probability <= 1.0f))
    throw Error(op, "invalid argument",
                "keep_probability = " + std::to_string(keep_probability) + ", allowed (0, 1]",
                __FILE__, __LINE__);
  return static_cast<float>(1.0 / static_cast<double>(keep_probability));
}

}  // namespace

void launch_dropout_forward(float* y, std::uint8_t* keep_mask, const float* x, std::size_t n,
                            float keep_probability, PhiloxKey key, cudaStream_t stream) {
  const NvtxRange range("nn/dropout_forward");
  const float scale = checked_scale(keep_probability, "dropout_forward");
  if (n == 0) return;
  dropout_forward<<<grid_stride_blocks((n + 3) / 4, kBlock), kBlock, 0, stream>>>(
      y, keep_mask, x, n, key, dropout_keep_threshold(keep_probability), scale);
  RESIDENT_CHECK_LAUNCH("dropout_forward");
}

void launch_dropout_backward(float* dx, const std::uint8_t* keep_mask, const float* dy,
                             std::size_t n, float keep_probability, nn::GradMode mode,
                             cudaStream_t stream) {
  const NvtxRange range("nn/dropout_backward");
  const float scale = checked_scale(keep_probability, "dropout_backward");
  if (n == 0) return;
  dropout_backward<<<grid_stride_blocks(n, kBlock), kBlock, 0, stream>>>(dx, keep_mask, dy, n, scale,
                                                         mode == nn::GradMode::Accumulate);
  RESIDENT_CHECK_LAUNCH("dropout_backward");
}

}  // namespace resident::kernels
