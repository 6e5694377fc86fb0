// Construction-time fills of a GpuReplayBuffer's device state: the empty trees (sums and
// maxima 0, minima +inf over all 2P nodes) and the slot iota for the rank sort. Overwrite;
// grid-stride.
#include "kernels/replay/replay_kernels.h"
#include "kernels/core/error.h"

namespace resident::kernels {

namespace {

__global__ void init_slot_iota(std::uint32_t* slots, std::uint32_t capacity) {
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < capacity;
       i += gridDim.x * blockDim.x)
    slots[i] = i;
}

__global__ void init_replay_tree(ReplayTreeView tree) {
  const double inf = __longlong_as_double(0x7ff0000000000000ll);
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < 2 * tree.leaves;
       i += gridDim.x * blockDim.x) {
    tree.sum[i] = 0.0;
    tree.min_positive[i] = inf;
    tree.max[i] = 0.0;
  }
}

}  // namespace

void launch_init_slot_iota(std::uint32_t* slots, std::uint32_t capacity, cudaStream_t stream) {
  init_slot_iota<<<1024, 256, 0, stream>>>(slots, capacity);
  RESIDENT_CHECK_LAUNCH("init_slot_iota");
}

void launch_init_replay_tree(ReplayTreeView tree, cudaStream_t stream) {
  init_replay_tree<<<1024, 256, 0, stream>>>(tree);
  RESIDENT_CHECK_LAUNCH("init_replay_tree");
}

}  // namespace resident::kernels
