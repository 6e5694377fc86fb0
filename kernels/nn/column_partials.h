// Deterministic sums over rows of per-column values (dgamma, dbeta of the norms), in two passes
// and no atomics: an op's first pass splits the rows into column_chunks(rows) chunks of
// column_chunk_rows(rows) consecutive rows and writes one partial sum per (chunk, column), the
// chunk's rows added in order, into scratch [chunks, cols]; launch_sum_column_partials then adds
// the chunks of each column in chunk order. The split depends on rows alone, so the result is
// the same bits on every run and every GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/core/grad_mode.h"

namespace resident::kernels {

// Number of row chunks for `rows` rows: ceil(rows / 32), clamped to [1, 1024].
std::size_t column_chunks(std::size_t rows);
// Rows per chunk: ceil(rows / column_chunks(rows)) (at least 1); the last chunk may be short or
// empty.
std::size_t column_chunk_rows(std::size_t rows);

// out[c] = sum over k in [0, chunks) of partials[k * cols + c], in k order; overwrites or
// accumulates into out [cols] as `mode` says. One thread per column; partials [chunks, cols].
void launch_sum_column_partials(float* out, const float* partials, std::size_t chunks,
                                std::size_t cols, nn::GradMode mode, cudaStream_t stream);

}  // namespace resident::kernels
