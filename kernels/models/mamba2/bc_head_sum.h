// Sums the SSD backward's per-head B and C gradients (bc_head_sum.cu):
//   dxbc[row, col0 + j] = sum_{h = 0..H-1, in order} dbc_heads[h, row, j],  j < width
// dbc_heads [H, rows, width]; dxbc [rows, stride], its columns [col0, col0 + width) overwritten.
// Elementwise, deterministic, capturable.
#pragma once

#include <cuda_runtime_api.h>

namespace resident::kernels::mamba2 {

struct BcHeadSumArgs {
  float* dxbc = nullptr;
  const float* dbc_heads = nullptr;
  int rows = 0;
  int heads = 0;
  int width = 0;  // 2N
  int stride = 0;
  int col0 = 0;   // H * P
};

inline constexpr int kBcHeadSumThreads = 256;

void launch_bc_head_sum(const BcHeadSumArgs& args, cudaStream_t stream);

}  // namespace resident::kernels::mamba2
