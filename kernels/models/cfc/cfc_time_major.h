// Time-major copy of a window batch (kernels/models/cfc/cfc_time_major.cu): xt [L, B, F] from
// x [B, L, F], so each time step's rows are contiguous for the CfC's per-step work and the
// weight-gradient GEMMs run over L * B rows. Overwrites xt (must not alias x). One thread per
// element, deterministic.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::cfc {

void launch_cfc_time_major(float* xt, const float* x, std::size_t batch, std::size_t window,
                           std::size_t features, cudaStream_t stream);

}  // namespace resident::kernels::cfc
