// TD errors: one thread per sampled row (grid-stride). Contract in td_error.h.
#include "kernels/rl/dqn/td_error.h"

#include "kernels/core/launch_config.h"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels::dqn {

namespace {

__global__ void td_error(float* q_taken, float* td_errors, const float* q_values,
                         const std::int32_t* actions, const float* targets, std::size_t batch,
                         std::size_t action_count) {
  for (std::size_t b = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; b < batch;
       b += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::int32_t a = actions[b];
    const float q = (a >= 0 && static_cast<std::size_t>(a) < action_count)
                        ? q_values[b * action_count + static_cast<std::size_t>(a)]
                        : __int_as_float(0x7fc00000);
    q_taken[b] = q;
    td_errors[b] = __fsub_rn(targets[b], q);
  }
}

}  // namespace

void launch_td_error(float* q_taken, float* td_errors, const float* q_values,
                     const std::int32_t* actions, const float* targets, std::size_t batch,
                     std::size_t action_count, cudaStream_t stream) {
  if (batch == 0 || action_count == 0)
    throw Error("launch_td_error", "invalid size", "batch and action_count must be >= 1", __FILE__,
                __LINE__);
  const NvtxRange range("dqn/td_error");
  constexpr unsigned kBlock = 128;
  td_error<<<grid_stride_blocks(batch, kBlock), kBlock, 0, stream>>>(
      q_taken, td_errors, q_values, actions, targets, batch, action_count);
  RESIDENT_CHECK_LAUNCH("td_error");
}

}  // namespace resident::kernels::dqn
