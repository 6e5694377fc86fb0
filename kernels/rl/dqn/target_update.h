// Target-network update over a whole parameter slab (kernels/rl/dqn/target_update.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::dqn {

// When *update_step % period == 0 (update_step is the online slab's AdamW step counter, read on
// the device, so graph replays follow it), every element i < n of the target slab becomes
//   tau == 1:  target[i] = online[i]                             (hard copy, exact)
//   else:      target[i] = target[i] + tau * (online[i] - target[i])   (Polyak; float, no FMA)
// and nothing happens otherwise. period >= 1, tau in (0, 1]. Both slabs have the same layout
// (padding stays 0 on both). In place, one thread per element (grid-stride); deterministic.
void launch_target_update(float* target, const float* online, std::size_t n, float tau,
                          std::uint64_t period, const std::uint64_t* update_step,
                          cudaStream_t stream);

}  // namespace resident::kernels::dqn
