// KAN combined weight: blockIdx.y is the layer; a grid-stride loop over the layer's [out, K]
// elements in row-major order (coalesced writes; the reads of the base and spline parts are
// contiguous runs too).
#include <algorithm>
#include <cstddef>
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/kan/kan_combined_weight.h"

namespace resident::kernels::kan {

namespace {

constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kThreads) kan_combined_weight(LayerTable table, int nb) {
  const LayerTensors& t = table.layer[blockIdx.y];
  const std::size_t in = static_cast<std::size_t>(t.in);
  const std::size_t k_width = in * (1 + nb);
  const std::size_t total = k_width * static_cast<std::size_t>(t.out);
  for (std::size_t e = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; e < total;
       e += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t o = e / k_width, c = e % k_width;
    float value;
    if (c < in) {
      value = t.base_weight[o * in + c];
    } else {
      const std::size_t spline_column = c - in;  // i * nb + m
      const std::size_t i = spline_column / nb;
      value = t.spline_weight[o * in * nb + spline_column] * t.spline_scaler[o * in + i];
    }
    t.combined[e] = value;
  }
}

}  // namespace

void launch_kan_combined_weight(const LayerTable& table, int basis_count, cudaStream_t stream) {
  const NvtxRange range("kan/combined_weight");
  if (table.count < 1 || table.count > kMaxLayers || basis_count < 1)
    throw Error("launch_kan_combined_weight", "invalid argument",
                "layers = " + std::to_string(table.count) + " (allowed [1, " +
                    std::to_string(kMaxLayers) +
                    "]), basis_count = " + std::to_string(basis_count) + " (allowed >= 1)",
                __FILE__, __LINE__);
  std::size_t largest = 0;
  for (int l = 0; l < table.count; ++l)
    largest = std::max(largest, static_cast<std::size_t>(table.layer[l].in) * (1 + basis_count) *
                                    static_cast<std::size_t>(table.layer[l].out));
  if (largest == 0) return;
  const dim3 blocks(grid_stride_blocks(largest, kThreads, 2048),
                    static_cast<unsigned>(table.count));
  kan_combined_weight<<<blocks, kThreads, 0, stream>>>(table, basis_count);
  RESIDENT_CHECK_LAUNCH("kan_combined_weight");
}

}  // namespace resident::kernels::kan
