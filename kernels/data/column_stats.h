// Per-column mean and standard deviation of the leading rows of a series
// (kernels/data/column_stats.cu): the normalization statistics of a training split.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::data {

// values [total_rows, columns] row-major fp32 on the device; only rows [0, rows) are read.
//   mean[c] = (1 / rows) * sum_{t < rows} values[t, c]
//   stddev[c] = sqrt((1 / rows) * sum_{t < rows} (values[t, c] - mean[c])^2 + epsilon)
// (population variance, two passes, all in fp64). mean and stddev [columns] fp64, overwritten.
// One block of 256 threads per column: thread k adds rows k, k + 256, ... in order, the block
// combines its threads in a fixed-order tree. Deterministic (no atomics; the bits depend on rows
// alone). Nothing allocated or synchronized. Throws resident::Error for rows == 0,
// columns == 0, columns > 2^31 - 1, or epsilon not finite and > 0.
void launch_column_stats(double* mean, double* stddev, const float* values, std::size_t rows,
                         std::size_t columns, double epsilon, cudaStream_t stream);

}  // namespace resident::kernels::data
