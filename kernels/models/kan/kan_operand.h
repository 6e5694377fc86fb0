// The KAN layer's GEMM operand (kernels/models/kan/kan_operand.cu): for each row b and input i,
//   a       = sum_{s < part_count} parts[s * part_stride + b * in + i]   (s in increasing order)
//   saved_input[b * in + i] = a        (when saved_input is non-null)
//   u       = grid.mid + grid.half * tanh(a)
//   operand[b * K + i]                  = silu(u)
//   operand[b * K + in + i * nb + m]    = B_m(u),  m < nb = G + k
// with K = in * (1 + nb) (kan_layout.h). parts holds the layer's input as part_count partial sums
// [rows, in] (a K-split GEMM's chunks; part_count 1 for a plain input); saved_input (the summed
// input) is what the backward of the layer needs (kan_input_grad.h). Overwrites operand[rows, K]
// and saved_input.
// Each element is written by one thread, no atomics: deterministic. No aliasing between the
// outputs and parts. grid.order in [1, kMaxSplineOrder], grid.grid_size in [1, kMaxGridSize],
// else resident::Error before anything is enqueued.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/models/kan/kan_layout.h"

namespace resident::kernels::kan {

void launch_kan_operand(float* operand, float* saved_input, const float* parts,
                        std::size_t part_count, std::size_t part_stride, std::size_t rows,
                        std::size_t in, const Grid& grid, cudaStream_t stream);

}  // namespace resident::kernels::kan
