// Proportional prioritized draws, one block (threads loop over draws when batch > block).
// Draw k descends the sum tree from the root with mass m: left when m < sum(left), else right
// (m -= sum(left)) unless the right subtree is empty (rounding past the end), exactly as
// CpuSumTree::find_prefix_sum, so half-open intervals [c_{i-1}, c_i) and zero leaves never
// drawn. IS weight: (P(i) / P_min)^-beta with P = p / total and P_min from the min tree.
// Outputs [batch] overwritten; the device step advances by one after every draw has read it.
#include "kernels/replay/replay_sampling.cuh"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr int kSampleBlock = 256;

__global__ void __launch_bounds__(kSampleBlock)
    sample_proportional(std::uint32_t* out_indices, std::uint32_t* out_generations,
                        float* out_weights, ReplayTreeView tree,
                        const std::uint32_t* generations_now, ReplayCounters* counters,
                        const double* uniforms, std::uint64_t seed, std::uint32_t batch,
                        ReplayParams params) {
  const std::uint64_t step = counters->step;
  const double total = tree.sum[1];
  const double min_probability = tree.min_positive[1] / total;
  const double beta = beta_at_step(params, step);
  for (std::uint32_t k = threadIdx.x; k < batch; k += blockDim.x) {
    double mass = draw_mass(params, k, batch, draw_uniform(uniforms, seed, step, k), total);
    std::uint32_t node = 1;
    while (node < tree.leaves) {
      const std::uint32_t left = 2 * node;
      const double left_sum = tree.sum[left];
      if (mass < left_sum) {
        node = left;
      } else if (tree.sum[left + 1] > 0.0) {
        mass -= left_sum;
        node = left + 1;
      } else {
        node = left;
      }
    }
    const std::uint32_t slot = node - tree.leaves;
    write_draw(out_indices, out_generations, out_weights, k, slot, generations_now,
               tree.sum[node] / total, min_probability, beta);
  }
  __syncthreads();
  if (threadIdx.x == 0) counters->step = step + 1;
}

}  // namespace

void launch_sample_proportional(std::uint32_t* out_indices, std::uint32_t* out_generations,
                                float* out_weights, ReplayTreeView tree,
                                const std::uint32_t* generations_now, ReplayCounters* counters,
                                const double* uniforms, std::uint64_t seed, std::uint32_t batch,
                                ReplayParams params, cudaStream_t stream) {
  const NvtxRange range("replay/sample_proportional");
  sample_proportional<<<1, kSampleBlock, 0, stream>>>(out_indices, out_generations, out_weights,
                                                       tree, generations_now, counters, uniforms,
                                                       seed, batch, params);
  RESIDENT_CHECK_LAUNCH("sample_proportional");
}

}  // namespace resident::kernels
