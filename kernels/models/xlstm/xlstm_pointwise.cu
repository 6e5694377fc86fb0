#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/xlstm/xlstm_pointwise.h"

namespace resident::kernels::xlstm {

namespace {

constexpr unsigned kThreads = 256;
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)

#define XLSTM_FOR_EACH(total)                                                                  \
  for (std::size_t e = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; e < (total);        \
       e += std::size_t{gridDim.x} * blockDim.x)

__device__ inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void mlstm_output_forward(float* out, const float* hn, const float* xc, const float* z,
                                     std::size_t z_stride, const float* w, const float* skip,
                                     std::size_t rows, std::size_t cols) {
  XLSTM_FOR_EACH(rows * cols) {
    const std::size_t r = e / cols, c = e % cols;
    const float zz = z[r * z_stride + c];
    out[e] = (w[c] * hn[e] + skip[c] * xc[e]) * (zz * sigmoidf(zz));
  }
}

__global__ void mlstm_output_backward(float* dhn, float* dxc, float* dz, std::size_t dz_stride,
                                      float* prod_w, float* prod_skip, const float* dout,
                                      const float* hn, const float* xc, const float* z,
                                      std::size_t z_stride, const float* w, const float* skip,
                                      std::size_t rows, std::size_t cols) {
  XLSTM_FOR_EACH(rows * cols) {
    const std::size_t r = e / cols, c = e % cols;
    const float zz = z[r * z_stride + c], sg = sigmoidf(zz), sz = zz * sg;
    const float g = dout[e], a = w[c] * hn[e] + skip[c] * xc[e];
    dhn[e] = g * sz * w[c];
    dxc[e] = g * sz * skip[c];
    dz[r * dz_stride + c] = g * a * sg * (1.0f + zz * (1.0f - sg));
    prod_w[e] = g * sz * hn[e];
    prod_skip[e] = g * sz * xc[e];
  }
}

__global__ void scaled_add(float* out, const float* x, const float* y, const float* w,
                           std::size_t rows, std::size_t cols) {
  XLSTM_FOR_EACH(rows * cols) {
    out[e] = x[e] + (w != nullptr ? w[e % cols] * y[e] : y[e]);
  }
}

__global__ void scaled_add_backward(float* dy, float* prod, const float* dout, const float* y,
                                    const float* w, std::size_t rows, std::size_t cols) {
  XLSTM_FOR_EACH(rows * cols) {
    dy[e] = dout[e] * w[e % cols];
    prod[e] = dout[e] * y[e];
  }
}

__global__ void gated_gelu_forward(float* out, const float* u, std::size_t rows,
                                   std::size_t width) {
  XLSTM_FOR_EACH(rows * width) {
    const std::size_t r = e / width, j = e % width;
    const float g = u[r * 2 * width + j], a = u[r * 2 * width + width + j];
    const float t = tanhf(kGeluC * (g + 0.044715f * g * g * g));
    out[e] = 0.5f * g * (1.0f + t) * a;
  }
}

__global__ void gated_gelu_backward(float* du, const float* dout, const float* u,
                                    std::size_t rows, std::size_t width) {
  XLSTM_FOR_EACH(rows * width) {
    const std::size_t r = e / width, j = e % width;
    const float g = u[r * 2 * width + j], a = u[r * 2 * width + width + j];
    const float t = tanhf(kGeluC * (g + 0.044715f * g * g * g));
    const float grad =
        0.5f * (1.0f + t) + 0.5f * g * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * 0.044715f * g * g);
    du[r * 2 * width + j] = dout[e] * a * grad;
    du[r * 2 * width + width + j] = dout[e] * 0.5f * g * (1.0f + t);
  }
}

__global__ void last_step_gather(float* last, const float* x, std::size_t batch,
                                 std::size_t window, std::size_t cols) {
  XLSTM_FOR_EACH(batch * cols) {
    const std::size_t b = e / cols, c = e % cols;
    last[e] = x[(b * window + window - 1) * cols + c];
  }
}

__global__ void last_step_scatter(float* dx, const float* dlast, std::size_t batch,
                                  std::size_t window, std::size_t cols) {
  XLSTM_FOR_EACH(batch * window * cols) {
    const std::size_t c = e % cols, t = (e / cols) % window, b = e / (cols * window);
    dx[e] = t == window - 1 ? dlast[b * cols + c] : 0.0f;
  }
}

#undef XLSTM_FOR_EACH

}  // namespace

void launch_mlstm_output_forward(float* out, const float* hn, const float* xc, const float* z,
                                 std::size_t z_stride, const float* w, const float* skip,
                                 std::size_t rows, std::size_t cols, cudaStream_t stream) {
  const NvtxRange range("xlstm/mlstm_output_forward");
  if (rows * cols == 0) return;
  mlstm_output_forward<<<grid_stride_blocks(rows * cols, kThreads), kThreads, 0, stream>>>(
      out, hn, xc, z, z_stride, w, skip, rows, cols);
  RESIDENT_CHECK_LAUNCH("mlstm_output_forward");
}

void launch_mlstm_output_backward(float* dhn, float* dxc, float* dz, std::size_t dz_stride,
                                  float* prod_w, float* prod_skip, const float* dout,
                                  const float* hn, const float* xc, const float* z,
                                  std::size_t z_stride, const float* w, const float* skip,
                                  std::size_t rows, std::size_t cols, cudaStream_t stream) {
  const NvtxRange range("xlstm/mlstm_output_backward");
  if (rows * cols == 0) return;
  mlstm_output_backward<<<grid_stride_blocks(rows * cols, kThreads), kThreads, 0, stream>>>(
      dhn, dxc, dz, dz_stride, prod_w, prod_skip, dout, hn, xc, z, z_stride, w, skip, rows, cols);
  RESIDENT_CHECK_LAUNCH("mlstm_output_backward");
}

void launch_scaled_add(float* out, const float* x, const float* y, const float* w,
                       std::size_t rows, std::size_t cols, cudaStream_t stream) {
  const NvtxRange range("xlstm/scaled_add");
  if (rows * cols == 0) return;
  scaled_add<<<grid_stride_blocks(rows * cols, kThreads), kThreads, 0, stream>>>(out, x, y, w,
                                                                                 rows, cols);
  RESIDENT_CHECK_LAUNCH("scaled_add");
}

void launch_scaled_add_backward(float* dy, float* prod, const float* dout, const float* y,
                                const float* w, std::size_t rows, std::size_t cols,
                                cudaStream_t stream) {
  if (w == nullptr)
    throw Error("launch_scaled_add_backward", "invalid argument", "w = null, allowed non-null",
                __FILE__, __LINE__);
  const NvtxRange range("xlstm/scaled_add_backward");
  if (rows * cols == 0) return;
  scaled_add_backward<<<grid_stride_blocks(rows * cols, kThreads), kThreads, 0, stream>>>(
      dy, prod, dout, y, w, rows, cols);
  RESIDENT_CHECK_LAUNCH("scaled_add_backward");
}

void launch_gated_gelu_forward(float* out, const float* u, std::size_t rows, std::size_t width,
                               cudaStream_t stream) {
  const NvtxRange range("xlstm/gated_gelu_forward");
  if (rows * width == 0) return;
  gated_gelu_forward<<<grid_stride_blocks(rows * width, kThreads), kThreads, 0, stream>>>(
      out, u, rows, width);
  RESIDENT_CHECK_LAUNCH("gated_gelu_forward");
}

void launch_gated_gelu_backward(float* du, const float* dout, const float* u, std::size_t rows,
                                std::size_t width, cudaStream_t stream) {
  const NvtxRange range("xlstm/gated_gelu_backward");
  if (rows * width == 0) return;
  gated_gelu_backward<<<grid_stride_blocks(rows * width, kThreads), kThreads, 0, stream>>>(
      du, dout, u, rows, width);
  RESIDENT_CHECK_LAUNCH("gated_gelu_backward");
}

void launch_last_step_gather(float* last, const float* x, std::size_t batch, std::size_t window,
                             std::size_t cols, cudaStream_t stream) {
  const NvtxRange range("xlstm/last_step_gather");
  if (batch * cols == 0) return;
  last_step_gather<<<grid_stride_blocks(batch * cols, kThreads), kThreads, 0, stream>>>(
      last, x, batch, window, cols);
  RESIDENT_CHECK_LAUNCH("last_step_gather");
}

void launch_last_step_scatter(float* dx, const float* dlast, std::size_t batch,
                              std::size_t window, std::size_t cols, cudaStream_t stream) {
  const NvtxRange range("xlstm/last_step_scatter");
  if (batch * window * cols == 0) return;
  last_step_scatter<<<grid_stride_blocks(batch * window * cols, kThreads), kThreads, 0, stream>>>(
      dx, dlast, batch, window, cols);
  RESIDENT_CHECK_LAUNCH("last_step_scatter");
}

}  // namespace resident::kernels::xlstm
