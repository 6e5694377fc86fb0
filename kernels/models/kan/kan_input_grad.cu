// KAN operand backward: one grid-stride thread per (row, input), reading its SiLU column and the
// k + 1 spline columns its point touches.
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/kan/kan_bases.cuh"
#include "kernels/models/kan/kan_input_grad.h"

namespace resident::kernels::kan {

namespace {

constexpr unsigned kThreads = 256;

template <int kOrder>
__global__ void __launch_bounds__(kThreads)
    kan_input_grad(float* __restrict__ da, const float* __restrict__ d_operand,
                   const float* __restrict__ saved_input, std::size_t rows, std::size_t in,
                   Grid grid) {
  const int nb = grid.basis_count();
  const std::size_t k_width = in * (1 + nb);
  const std::size_t total = rows * in;
  for (std::size_t e = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; e < total;
       e += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t row = e / in, i = e % in;
    const float a = saved_input[e];
    const float u = squash(tanhf(a), grid);
    const float* g = d_operand + row * k_width;
    float value[kOrder + 1], derivative[kOrder + 1];
    const int first = local_bases<kOrder>(u, grid, value, &derivative);
    float spline = 0.0f;
    const float* g_spline = g + in + i * nb;
#pragma unroll
    for (int r = 0; r <= kOrder; ++r) {
      const int m = first + r;
      if (m >= 0 && m < nb) spline += g_spline[m] * derivative[r];
    }
    const float du = g[i] * silu_derivative(u) + spline;
    const float c = coshf(a);  // c * c overflows to inf for |a| > ~44: sech^2 = 0, its limit
    da[e] = du * (grid.half / (c * c));
  }
}

template <int kOrder>
void launch(float* da, const float* d_operand, const float* saved_input, std::size_t rows,
            std::size_t in, const Grid& grid, cudaStream_t stream) {
  kan_input_grad<kOrder><<<grid_stride_blocks(rows * in, kThreads), kThreads, 0, stream>>>(
      da, d_operand, saved_input, rows, in, grid);
  RESIDENT_CHECK_LAUNCH("kan_input_grad");
}

}  // namespace

void launch_kan_input_grad(float* da, const float* d_operand, const float* saved_input,
                           std::size_t rows, std::size_t in, const Grid& grid,
                           cudaStream_t stream) {
  const NvtxRange range("kan/input_grad");
  if (rows == 0 || in == 0) return;
  switch (grid.order) {
    case 1: return launch<1>(da, d_operand, saved_input, rows, in, grid, stream);
    case 2: return launch<2>(da, d_operand, saved_input, rows, in, grid, stream);
    case 3: return launch<3>(da, d_operand, saved_input, rows, in, grid, stream);
    case 4: return launch<4>(da, d_operand, saved_input, rows, in, grid, stream);
    case 5: return launch<5>(da, d_operand, saved_input, rows, in, grid, stream);
    default:
      throw Error("launch_kan_input_grad", "invalid argument",
                  "order = " + std::to_string(grid.order) + ", allowed [1, " +
                      std::to_string(kMaxSplineOrder) + "]",
                  __FILE__, __LINE__);
  }
}

}  // namespace resident::kernels::kan
