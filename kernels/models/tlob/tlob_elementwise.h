// TLOB's layout and elementwise kernels (kernels/models/tlob/tlob_elementwise.cu): the transpose
// between a temporal and a feature layer (with the layer's residual folded in), and additions.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::tlob {

// dst [batch, cols, rows] (overwritten) = transpose of (src + addend) per sample, src and addend
// [batch, rows, cols]; addend may be null (plain transpose). dst may not alias src or addend.
// Tiled through shared memory; exact (one addition at most); capturable. Throws resident::Error
// for an empty shape.
void launch_transpose_add(float* dst, const float* src, const float* addend, std::size_t batch,
                          std::size_t rows, std::size_t cols, cudaStream_t stream);

// c[i] = a[i] + b[i % period] for i < n (overwritten; c may alias a). period divides n, >= 1:
// period = n is a plain sum, a smaller period broadcasts b (the positional embedding over the
// batch). Capturable. Throws resident::Error when period is 0 or does not divide n.
void launch_add_periodic(float* c, const float* a, const float* b, std::size_t n,
                         std::size_t period, cudaStream_t stream);

}  // namespace resident::kernels::tlob
