// KAN weight-gradient split: blockIdx.y is the layer; a grid-stride loop covers first the layer's
// spline-weight elements [out * in * nb] (coalesced read-modify-write of d_spline_weight), then
// its edges [out * in], each of which writes d_base_weight and sums its nb products for
// d_spline_scaler.
#include <algorithm>
#include <cstddef>
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/kan/kan_weight_grad_split.h"

namespace resident::kernels::kan {

namespace {

constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kThreads) kan_weight_grad_split(LayerTable table, int nb) {
  const LayerTensors& t = table.layer[blockIdx.y];
  const std::size_t in = static_cast<std::size_t>(t.in);
  const std::size_t edges = in * static_cast<std::size_t>(t.out);
  const std::size_t k_width = in * (1 + nb);
  const std::size_t spline_elements = edges * nb;
  for (std::size_t e = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
       e < spline_elements + edges; e += std::size_t{gridDim.x} * blockDim.x) {
    if (e < spline_elements) {
      const std::size_t edge = e / nb, o = edge / in;
      const std::size_t spline_column = e - o * in * nb;  // i * nb + m
      t.d_spline_weight[e] +=
          t.d_combined[o * k_width + in + spline_column] * t.spline_scaler[edge];
    } else {
      const std::size_t edge = e - spline_elements, o = edge / in, i = edge % in;
      const float* g = t.d_combined + o * k_width;
      t.d_base_weight[edge] += g[i];
      const float* g_spline = g + in + i * nb;
      const float* w = t.spline_weight + edge * nb;
      float sum = 0.0f;
      for (int m = 0; m < nb; ++m) sum += g_spline[m] * w[m];
      t.d_spline_scaler[edge] += sum;
    }
  }
}

}  // namespace

void launch_kan_weight_grad_split(const LayerTable& table, int basis_count, cudaStream_t stream) {
  const NvtxRange range("kan/weight_grad_split");
  if (table.count < 1 || table.count > kMaxLayers || basis_count < 1)
    throw Error("launch_kan_weight_grad_split", "invalid argument",
                "layers = " + std::to_string(table.count) + " (allowed [1, " +
                    std::to_string(kMaxLayers) +
                    "]), basis_count = " + std::to_string(basis_count) + " (allowed >= 1)",
                __FILE__, __LINE__);
  std::size_t largest = 0;
  for (int l = 0; l < table.count; ++l)
    largest =
        std::max(largest, static_cast<std::size_t>(table.layer[l].in) *
                              static_cast<std::size_t>(table.layer[l].out) * (1 + basis_count));
  if (largest == 0) return;
  const dim3 blocks(grid_stride_blocks(largest, kThreads, 2048),
                    static_cast<unsigned>(table.count));
  kan_weight_grad_split<<<blocks, kThreads, 0, stream>>>(table, basis_count);
  RESIDENT_CHECK_LAUNCH("kan_weight_grad_split");
}

}  // namespace resident::kernels::kan
