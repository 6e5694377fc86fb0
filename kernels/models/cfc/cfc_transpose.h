// Transposed copy of a weight (kernels/models/cfc/cfc_transpose.cu): out [cols, rows] from
// w [rows, cols], both row-major, so the CfC forward step kernel reads its weights with the
// output unit fastest (coalesced). Overwrites out (must not alias w). Deterministic.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::cfc {

void launch_cfc_transpose(float* out, const float* w, std::size_t rows, std::size_t cols,
                          cudaStream_t stream);

}  // namespace resident::kernels::cfc
