// Headwise (block-diagonal) projection weights as dense matrices (kernels/models/xlstm/
// headwise_dense.cu), so the projections run as cuBLAS GEMMs (a documented deviation from a
// block-diagonal kernel: the zero blocks cost FLOPs, not correctness). A headwise weight W
// [nb, bo, bi] maps x [rows, nb * bi] to y[r, blk * bo + o] = sum_i W[blk, o, i] x[r, blk * bi +
// i]; its dense form is [nb * bo, nb * bi] with W's blocks on the diagonal and zeros elsewhere.
// Deterministic; nothing allocated or synchronized.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::xlstm {

// dense rows [0, nb * bo), columns [0, nb * bi) with row stride ld (>= nb * bi) overwritten.
void launch_headwise_to_dense(float* dense, std::size_t ld, const float* W, std::size_t nb,
                              std::size_t bo, std::size_t bi, cudaStream_t stream);

// dW[blk, o, i] += dense[(blk * bo + o) * ld + blk * bi + i]: the diagonal blocks of a dense
// weight gradient added into the headwise one (the off-diagonal entries are dropped).
void launch_dense_to_headwise_add(float* dW, const float* dense, std::size_t ld, std::size_t nb,
                                  std::size_t bo, std::size_t bi, cudaStream_t stream);

}  // namespace resident::kernels::xlstm
