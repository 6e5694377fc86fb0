// The parameter gradients of every KAN layer from the gradient of its combined weight, in one
// launch (kernels/models/kan/kan_weight_grad_split.cu). For each layer of `table` (kan_layout.h),
// with G~ = d_combined [out, K], K = in * (1 + nb), s = spline_scaler, W = spline_weight:
//   d_base_weight[o, i]      += G~[o, i]
//   d_spline_weight[o, i, m] += G~[o, in + i * nb + m] * s[o, i]
//   d_spline_scaler[o, i]    += sum_m G~[o, in + i * nb + m] * W[o, i, m]   (m in increasing order)
// ACCUMULATES into the three gradient views (the model's backward adds into the slab's grads).
// One thread per written element, no atomics: deterministic. The gradients may not alias
// d_combined or the parameters. table.count in [1, kMaxLayers], nb >= 1, else resident::Error
// before anything is enqueued.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/models/kan/kan_layout.h"

namespace resident::kernels::kan {

void launch_kan_weight_grad_split(const LayerTable& table, int basis_count, cudaStream_t stream);

}  // namespace resident::kernels::kan
