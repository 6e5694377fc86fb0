// Gather of sampled rows: one thread per (draw, state element). out_states and out_next_states
// [batch, state_dim] row-major, out_actions/out_rewards/out_dones [batch]. Overwrites.
#include "kernels/replay/replay_kernels.h"
#include "kernels/core/launch_config.h"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels {

namespace {

__global__ void gather_rows(float* out_states, std::int32_t* out_actions, float* out_rewards,
                            float* out_next_states, std::uint8_t* out_dones,
                            ReplayStorageView storage, const std::uint32_t* indices,
                            std::uint32_t batch) {
  const std::uint64_t dim = storage.state_dim;
  const std::uint64_t total = std::uint64_t{batch} * dim;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t k = i / dim;
    const std::uint64_t col = i - k * dim;
    const std::uint64_t slot = indices[k];
    out_states[i] = storage.states[slot * dim + col];
    out_next_states[i] = storage.next_states[slot * dim + col];
    if (col == 0) {
      out_actions[k] = storage.actions[slot];
      out_rewards[k] = storage.rewards[slot];
      out_dones[k] = storage.dones[slot];
    }
  }
}

}  // namespace

void launch_gather_rows(float* out_states, std::int32_t* out_actions, float* out_rewards,
                        float* out_next_states, std::uint8_t* out_dones,
                        ReplayStorageView storage, const std::uint32_t* indices,
                        std::uint32_t batch, cudaStream_t stream) {
  const NvtxRange range("replay/gather_rows");
  const std::uint64_t total = std::uint64_t{batch} * storage.state_dim;
  const unsigned blocks = grid_stride_blocks(total, 256, 4096);
  gather_rows<<<blocks, 256, 0, stream>>>(out_states, out_actions, out_rewards, out_next_states,
                                           out_dones, storage, indices, batch);
  RESIDENT_CHECK_LAUNCH("gather_rows");
}

}  // namespace resident::kernels
