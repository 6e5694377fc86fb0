// The combined weight of every KAN layer in one launch (kernels/models/kan/kan_combined_weight.cu):
// for each layer of `table` (kan_layout.h), with K = in * (1 + nb),
//   combined[o, i]                = base_weight[o, i]
//   combined[o, in + i * nb + m]  = spline_weight[o, i, m] * spline_scaler[o, i]
// Overwrites each layer's combined [out, K]; reads base_weight, spline_weight, spline_scaler.
// One thread per element, deterministic; combined may not alias the parameters. Run once per
// step after the parameters change (before the forward GEMMs). table.count in [1, kMaxLayers],
// nb >= 1, else resident::Error before anything is enqueued.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/models/kan/kan_layout.h"

namespace resident::kernels::kan {

void launch_kan_combined_weight(const LayerTable& table, int basis_count, cudaStream_t stream);

}  // namespace resident::kernels::kan
