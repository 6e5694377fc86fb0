// Dueling head forward and backward: one thread per row (grid-stride). Contract in
// dueling_head.h.
#include "kernels/rl/dqn/dueling_head.h"

#include "kernels/core/launch_config.h"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::dqn {

namespace {

__global__ void dueling_forward(float* q, const float* head, std::size_t batch,
                                std::size_t action_count) {
  for (std::size_t b = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; b < batch;
       b += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float* h = head + b * (action_count + 1);
    float sum = 0.0f;
    for (std::size_t a = 0; a < action_count; ++a) sum = __fadd_rn(sum, h[1 + a]);
    const float mean = __fdiv_rn(sum, static_cast<float>(action_count));
    for (std::size_t a = 0; a < action_count; ++a)
      q[b * action_count + a] = __fadd_rn(h[0], __fsub_rn(h[1 + a], mean));
  }
}

__global__ void dueling_backward(float* d_head, const float* d_q, std::size_t batch,
                                 std::size_t action_count) {
  for (std::size_t b = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; b < batch;
       b += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float* g = d_q + b * action_count;
    float sum = 0.0f;
    for (std::size_t a = 0; a < action_count; ++a) sum = __fadd_rn(sum, g[a]);
    const float mean = __fdiv_rn(sum, static_cast<float>(action_count));
    float* out = d_head + b * (action_count + 1);
    out[0] = sum;
    for (std::size_t a = 0; a < action_count; ++a) out[1 + a] = __fsub_rn(g[a], mean);
  }
}

void check(const char* call, std::size_t batch, std::size_t action_count) {
  if (batch == 0 || action_count == 0)
    throw Error(call, "invalid size", "batch and action_count must be >= 1", __FILE__, __LINE__);
}

constexpr unsigned kBlock = 128;

}  // namespace

void launch_dueling_forward(float* q, const float* head, std::size_t batch,
                            std::size_t action_count, cudaStream_t stream) {
  check("launch_dueling_forward", batch, action_count);
  const NvtxRange range("dqn/dueling_forward");
  dueling_forward<<<grid_stride_blocks(batch, kBlock), kBlock, 0, stream>>>(q, head, batch,
                                                                            action_count);
  RESIDENT_CHECK_LAUNCH("dueling_forward");
}

void launch_dueling_backward(float* d_head, const float* d_q, std::size_t batch,
                             std::size_t action_count, cudaStream_t stream) {
  check("launch_dueling_backward", batch, action_count);
  const NvtxRange range("dqn/dueling_backward");
  dueling_backward<<<grid_stride_blocks(batch, kBlock), kBlock, 0, stream>>>(d_head, d_q, batch,
                                                                             action_count);
  RESIDENT_CHECK_LAUNCH("dueling_backward");
}

}  // namespace resident::kernels::dqn
