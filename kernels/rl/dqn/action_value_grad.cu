// Scatter of d(q_taken) into the Q rows: one thread per element (grid-stride). Contract in
// action_value_grad.h.
#include "kernels/rl/dqn/action_value_grad.h"

#include "kernels/core/launch_config.h"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels::dqn {

namespace {

__global__ void action_value_grad(float* d_q_values, const float* d_q_taken,
                                  const std::int32_t* actions, std::size_t batch,
                                  std::size_t action_count) {
  const std::size_t total = batch * action_count;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t b = i / action_count;
    const std::size_t a = i - b * action_count;
    d_q_values[i] = actions[b] == static_cast<std::int32_t>(a) ? d_q_taken[b] : 0.0f;
  }
}

}  // namespace

void launch_action_value_grad(float* d_q_values, const float* d_q_taken,
                              const std::int32_t* actions, std::size_t batch,
                              std::size_t action_count, cudaStream_t stream) {
  if (batch == 0 || action_count == 0)
    throw Error("launch_action_value_grad", "invalid size", "batch and action_count must be >= 1",
                __FILE__, __LINE__);
  const NvtxRange range("dqn/action_value_grad");
  constexpr unsigned kBlock = 256;
  action_value_grad<<<grid_stride_blocks(batch * action_count, kBlock), kBlock, 0, stream>>>(
      d_q_values, d_q_taken, actions, batch, action_count);
  RESIDENT_CHECK_LAUNCH("action_value_grad");
}

}  // namespace resident::kernels::dqn
