// TLOB transposes and additions (contract in tlob_elementwise.h).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/tlob/tlob_elementwise.h"

namespace resident::kernels::tlob {

namespace {

constexpr unsigned kTile = 32;
constexpr unsigned kRowsPerPass = 8;
constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kTile * kRowsPerPass)
    transpose_add(float* dst, const float* src, const float* addend, std::size_t rows,
                  std::size_t cols) {
  __shared__ float tile[kTile][kTile + 1];
  const std::size_t base = blockIdx.z * rows * cols;
  const std::size_t r0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile;
  for (unsigned k = threadIdx.y; k < kTile; k += kRowsPerPass) {
    const std::size_t r = r0 + k, c = c0 + threadIdx.x;
    if (r < rows && c < cols) {
      const std::size_t i = base + r * cols + c;
      tile[k][threadIdx.x] = addend != nullptr ? src[i] + addend[i] : src[i];
    }
  }
  __syncthreads();
  for (unsigned k = threadIdx.y; k < kTile; k += kRowsPerPass) {
    const std::size_t c = c0 + k, r = r0 + threadIdx.x;
    if (r < rows && c < cols) dst[base + c * rows + r] = tile[threadIdx.x][k];
  }
}

__global__ void __launch_bounds__(kThreads)
    add_periodic(float* c, const float* a, const float* b, std::size_t n, std::size_t period) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride)
    c[i] = a[i] + b[i % period];
}

}  // namespace

void launch_transpose_add(float* dst, const float* src, const float* addend, std::size_t batch,
                          std::size_t rows, std::size_t cols, cudaStream_t stream) {
  if (batch == 0 || rows == 0 || cols == 0 || batch > 65535)
    throw Error("launch_transpose_add", "invalid argument",
                "batch = " + std::to_string(batch) + ", rows = " + std::to_string(rows) +
                    ", cols = " + std::to_string(cols) + "; allowed batch in [1, 65535], rows, "
                    "cols >= 1",
                __FILE__, __LINE__);
  const NvtxRange range("tlob/transpose_add");
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile),
                  static_cast<unsigned>((rows + kTile - 1) / kTile), static_cast<unsigned>(batch));
  transpose_add<<<grid, dim3(kTile, kRowsPerPass), 0, stream>>>(dst, src, addend, rows, cols);
  RESIDENT_CHECK_LAUNCH("transpose_add");
}

void launch_add_periodic(float* c, const float* a, const float* b, std::size_t n,
                         std::size_t period, cudaStream_t stream) {
  if (period == 0 || n % period != 0)
    throw Error("launch_add_periodic", "invalid argument",
                "n = " + std::to_string(n) + ", period = " + std::to_string(period) +
                    "; allowed a period >= 1 that divides n",
                __FILE__, __LINE__);
  if (n == 0) return;
  const NvtxRange range("tlob/add_periodic");
  add_periodic<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(c, a, b, n, period);
  RESIDENT_CHECK_LAUNCH("add_periodic");
}

}  // namespace resident::kernels::tlob
