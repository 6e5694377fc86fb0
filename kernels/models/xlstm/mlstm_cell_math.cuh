// Device helpers shared by the mLSTM cell's forward and backward kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::xlstm {

// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): no overflow for any x.
__device__ inline float log_sigmoid(float x) {
  return fminf(x, 0.0f) - log1pf(expf(-fabsf(x)));
}

// Shared-memory rows of length DH are padded to DH + 1 floats, so threads reading different rows
// at the same column hit different banks.
__host__ __device__ inline int padded_dim(int head_dim) { return head_dim + 1; }

// F_t = sum_{j <= t} logsigmoid(f~_j), in step order (one thread: fixed order).
__device__ inline void forget_cumsum(float* F, const float* gates, long long row0, int row_stride,
                                     int column, int L) {
  if (threadIdx.x == 0) {
    float acc = 0.0f;
    for (int t = 0; t < L; ++t) {
      acc += log_sigmoid(gates[(row0 + t) * row_stride + column]);
      F[t] = acc;
    }
  }
}

// Raise each kernel's dynamic shared memory limit to at least `bytes` (setup; mlstm_cell.h's
// configure call checks the device limit first).
void configure_mlstm_cell_forward(std::size_t bytes);
void configure_mlstm_cell_backward(std::size_t bytes);

}  // namespace resident::kernels::xlstm
