// Hard or Polyak target update, grid-stride over the slab. Contract in target_update.h.
#include "kernels/rl/dqn/target_update.h"

#include <string>

#include "kernels/core/launch_config.h"
#include "kernels/rl/dqn/target_update_element.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::dqn {

namespace {

__global__ void target_update(float* target, const float* online, std::size_t n, float tau,
                              std::uint64_t period, const std::uint64_t* update_step) {
  if (*update_step % period != 0) return;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    target[i] = updated_target(target[i], online[i], tau);
}

}  // namespace

void launch_target_update(float* target, const float* online, std::size_t n, float tau,
                          std::uint64_t period, const std::uint64_t* update_step,
                          cudaStream_t stream) {
  if (period == 0 || !(tau > 0.0f && tau <= 1.0f))
    throw Error("launch_target_update", "invalid argument",
                "period = " + std::to_string(period) + " (allowed >= 1), tau = " +
                    std::to_string(tau) + " (allowed (0, 1])",
                __FILE__, __LINE__);
  if (n == 0) return;
  const NvtxRange range("dqn/target_update");
  constexpr unsigned kBlock = 256;
  target_update<<<grid_stride_blocks(n, kBlock, 1024), kBlock, 0, stream>>>(target, online, n, tau,
                                                                           period, update_step);
  RESIDENT_CHECK_LAUNCH("target_update");
}

}  // namespace resident::kernels::dqn
