// Global gradient norm and its clip scale (kernels/nn/global_norm.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels {

// Length of the fp64 `partials` scratch that launch_global_norm needs for n elements (at least
// 1, at most 1024); a function of n alone, so the caller sizes it once.
std::size_t global_norm_partial_count(std::size_t n);

// *norm = sqrt(sum of grads[i]^2) and *clip_scale = 1 when norm <= max_norm, else
// max_norm / norm (the rule of tests/reference clip_global_norm), both rounded once to fp32 from
// fp64. grads [n] fp32, 16-byte aligned (throws otherwise); squares are exact in fp64 and summed
// in fp64. Two passes: fixed per-thread element sets and fixed-order block reductions into
// partials [global_norm_partial_count(n)], then one block reduces them in a fixed order and
// writes both outputs. Deterministic (no atomics; the grid depends only on n); no allocation;
// graph-capturable. Overwrites norm, clip_scale and partials. max_norm > 0 (+inf: never clips);
// non-finite grads give a non-finite norm and scale.
void launch_global_norm(float* norm, float* clip_scale, double* partials, const float* grads,
                        std::size_t n, float max_norm, cudaStream_t stream);

// The first pass alone: partials [global_norm_partial_count(n)] (overwritten) = the fixed-order
// fp64 block sums of grads[i]^2 that launch_global_norm reduces next. One kernel; for a consumer
// that finishes the norm itself (launch_clip_adamw, kernels/nn/adamw.h). Same alignment rule,
// determinism and capturability as launch_global_norm.
void launch_global_norm_partials(double* partials, const float* grads, std::size_t n,
                                 cudaStream_t stream);

}  // namespace resident::kernels
