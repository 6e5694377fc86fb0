// TFT's elementwise and layout kernels (contract in tft_elementwise.h).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/tft/tft_elementwise.h"

namespace resident::kernels::tft {

namespace {

constexpr unsigned kThreads = 256;

__device__ inline std::size_t first_index() {
  return blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
}
__device__ inline std::size_t grid_stride() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}

__global__ void __launch_bounds__(kThreads)
    prescale_forward(float* e, const float* x, const float* w, const float* b, std::size_t n,
                     std::size_t width, std::size_t per_row) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    const std::size_t jc = i % per_row, row = i / per_row;
    e[i] = fmaf(w[jc], x[row * (per_row / width) + jc / width], b[jc]);
  }
}

__global__ void __launch_bounds__(kThreads)
    prescale_terms(float* terms, const float* de, const float* x, std::size_t n,
                   std::size_t width) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) terms[i] = de[i] * x[i / width];
}

__global__ void __launch_bounds__(kThreads)
    add_into(float* dst, const float* src, std::size_t n, bool accumulate) {
  for (std::size_t i = first_index(); i < n; i += grid_stride())
    dst[i] = accumulate ? dst[i] + src[i] : src[i];
}

__global__ void __launch_bounds__(kThreads)
    glu_add(float* r, const float* pre, const float* resid, std::size_t n, std::size_t half) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    const std::size_t row = i / half, k = i % half;
    const float a = pre[row * 2 * half + k], g = pre[row * 2 * half + half + k];
    r[i] = resid[i] + a / (1.0f + expf(-g));
  }
}

__global__ void __launch_bounds__(kThreads)
    last_step(float* dense, float* strided, std::size_t n, std::size_t steps, std::size_t width,
              bool gather) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    const std::size_t b = i / width, k = i % width;
    const std::size_t at = (b * steps + steps - 1) * width + k;
    if (gather)
      dense[i] = strided[at];
    else
      strided[at] += dense[i];
  }
}

void check_shape(const char* call, std::size_t a, std::size_t b, std::size_t c) {
  if (a == 0 || b == 0 || c == 0)
    throw Error(call, "invalid argument",
                "sizes " + std::to_string(a) + ", " + std::to_string(b) + ", " +
                    std::to_string(c) + "; allowed each >= 1",
                __FILE__, __LINE__);
}

}  // namespace

void launch_prescale_forward(float* e, const float* x, const float* w, const float* b,
                             std::size_t rows, std::size_t features, std::size_t width,
                             cudaStream_t stream) {
  check_shape("launch_prescale_forward", rows, features, width);
  const NvtxRange range("tft/prescale_forward");
  const std::size_t n = rows * features * width;
  prescale_forward<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(
      e, x, w, b, n, width, features * width);
  RESIDENT_CHECK_LAUNCH("prescale_forward");
}

void launch_prescale_weight_terms(float* terms, const float* de, const float* x,
                                  std::size_t rows, std::size_t features, std::size_t width,
                                  cudaStream_t stream) {
  check_shape("launch_prescale_weight_terms", rows, features, width);
  const NvtxRange range("tft/prescale_weight_terms");
  const std::size_t n = rows * features * width;
  prescale_terms<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(terms, de, x, n,
                                                                           width);
  RESIDENT_CHECK_LAUNCH("prescale_terms");
}

void launch_add_into(float* dst, const float* src, std::size_t n, nn::GradMode mode,
                     cudaStream_t stream) {
  if (n == 0) return;
  const NvtxRange range("tft/add_into");
  add_into<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(
      dst, src, n, mode == nn::GradMode::Accumulate);
  RESIDENT_CHECK_LAUNCH("add_into");
}

void launch_glu_add(float* r, const float* pre, const float* resid, std::size_t rows,
                    std::size_t half, cudaStream_t stream) {
  check_shape("launch_glu_add", rows, half, 1);
  const NvtxRange range("tft/glu_add");
  const std::size_t n = rows * half;
  glu_add<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(r, pre, resid, n, half);
  RESIDENT_CHECK_LAUNCH("glu_add");
}

void launch_last_step_gather(float* out, const float* in, std::size_t batch, std::size_t steps,
                             std::size_t width, cudaStream_t stream) {
  check_shape("launch_last_step_gather", batch, steps, width);
  const NvtxRange range("tft/last_step_gather");
  const std::size_t n = batch * width;
  last_step<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(
      out, const_cast<float*>(in), n, steps, width, true);
  RESIDENT_CHECK_LAUNCH("last_step_gather");
}

void launch_last_step_add(float* inout, const float* add, std::size_t batch, std::size_t steps,
                          std::size_t width, cudaStream_t stream) {
  check_shape("launch_last_step_add", batch, steps, width);
  const NvtxRange range("tft/last_step_add");
  const std::size_t n = batch * width;
  last_step<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(
      const_cast<float*>(add), inout, n, steps, width, false);
  RESIDENT_CHECK_LAUNCH("last_step_add");
}

}  // namespace resident::kernels::tft
