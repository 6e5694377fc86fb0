// Backward of a KAN layer's operand (kernels/models/kan/kan_input_grad.cu): from the gradient of
// the operand d_operand [rows, K] (K = in * (1 + nb), kan_layout.h) and the layer's saved input
// a [rows, in] (kan_operand.h's saved_input), the gradient of a:
//   u      = grid.mid + grid.half * tanh(a)
//   da[b, i] = grid.half * sech^2(a) * ( d_operand[b, i] * silu'(u)
//                                       + sum_m d_operand[b, in + i * nb + m] * B'_m(u) )
// (only the k + 1 bases non-zero at u contribute). sech^2(a) = 1 / cosh^2(a) is formed from a,
// not as 1 - tanh^2 (which loses its relative precision where tanh saturates). Overwrites
// da [rows, in]. One thread per element, no atomics: deterministic. da may not alias the inputs.
// grid.order in [1, kMaxSplineOrder], else resident::Error before anything is enqueued.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/models/kan/kan_layout.h"

namespace resident::kernels::kan {

void launch_kan_input_grad(float* da, const float* d_operand, const float* saved_input,
                           std::size_t rows, std::size_t in, const Grid& grid,
                           cudaStream_t stream);

}  // namespace resident::kernels::kan
