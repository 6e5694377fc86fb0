// The time sinusoid of every timestep (kernels/models/diffusion/diffusion_time_table.cu), the
// sampler's input to the time MLP: table[t, c] = time_sinusoid(t, c, time_dim) for t < steps
// (diffusion_random.cuh). Overwrites table [steps, time_dim]; deterministic.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::diffusion {

void launch_diffusion_time_table(float* table, std::size_t steps, std::size_t time_dim,
                                 cudaStream_t stream);

}  // namespace resident::kernels::diffusion
