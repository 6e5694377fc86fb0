// z-scores of a series in place with given per-column statistics
// (kernels/data/normalize_columns.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::data {

// values [rows, columns] row-major fp32 on the device, overwritten in place:
//   values[t, c] = float((double(values[t, c]) - mean[c]) / stddev[c])
// (one fp64 subtraction and one division, rounded once to fp32). mean, stddev [columns] fp64,
// stddev > 0 (column_stats.h gives sqrt(var + epsilon)). Elementwise, deterministic; nothing
// allocated or synchronized. Throws resident::Error for rows == 0 or columns == 0.
void launch_normalize_columns(float* values, const double* mean, const double* stddev,
                              std::size_t rows, std::size_t columns, cudaStream_t stream);

}  // namespace resident::kernels::data
