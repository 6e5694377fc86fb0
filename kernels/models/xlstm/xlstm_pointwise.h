// The xLSTM model's elementwise ops (kernels/models/xlstm/xlstm_pointwise.cu), each a grid-stride
// kernel over rows x cols row-major buffers; every output overwritten; deterministic; nothing
// allocated or synchronized. Column sums of the `prod*` outputs (the per-channel weights'
// gradients) are left to the caller's fixed-order column sum (kernels/nn/bias.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::xlstm {

// mLSTM output: out[r, c] = (w[c] hn[r, c] + skip[c] xc[r, c]) SiLU(z[r, c]); z read with row
// stride z_stride; out, hn, xc [rows, cols].
void launch_mlstm_output_forward(float* out, const float* hn, const float* xc, const float* z,
                                 std::size_t z_stride, const float* w, const float* skip,
                                 std::size_t rows, std::size_t cols, cudaStream_t stream);

// Its backward for dout: dhn = dout SiLU(z) w, dxc = dout SiLU(z) skip, dz (row stride
// dz_stride) = dout a SiLU'(z) with a = w hn + skip xc, prod_w = dout SiLU(z) hn, prod_skip =
// dout SiLU(z) xc.
void launch_mlstm_output_backward(float* dhn, float* dxc, float* dz, std::size_t dz_stride,
                                  float* prod_w, float* prod_skip, const float* dout,
                                  const float* hn, const float* xc, const float* z,
                                  std::size_t z_stride, const float* w, const float* skip,
                                  std::size_t rows, std::size_t cols, cudaStream_t stream);

// out = x + w[c] y (w null: x + y). out may alias x.
void launch_scaled_add(float* out, const float* x, const float* y, const float* w,
                       std::size_t rows, std::size_t cols, cudaStream_t stream);

// Backward of scaled_add's y path: dy = dout w[c], prod = dout y.
void launch_scaled_add_backward(float* dy, float* prod, const float* dout, const float* y,
                                const float* w, std::size_t rows, std::size_t cols,
                                cudaStream_t stream);

// Gated GeLU (tanh approximation): u [rows, 2 width] = [g | a]; out [rows, width] = GeLU(g) a.
void launch_gated_gelu_forward(float* out, const float* u, std::size_t rows, std::size_t width,
                               cudaStream_t stream);
// du [rows, 2 width] = [dout a GeLU'(g) | dout GeLU(g)].
void launch_gated_gelu_backward(float* du, const float* dout, const float* u, std::size_t rows,
                                std::size_t width, cudaStream_t stream);

// last [batch, cols] = x[b, L - 1, :] of x [batch, L, cols].
void launch_last_step_gather(float* last, const float* x, std::size_t batch, std::size_t window,
                             std::size_t cols, cudaStream_t stream);
// dx [batch, L, cols] = dlast at step L - 1, 0 elsewhere.
void launch_last_step_scatter(float* dx, const float* dlast, std::size_t batch,
                              std::size_t window, std::size_t cols, cudaStream_t stream);

}  // namespace resident::kernels::xlstm
