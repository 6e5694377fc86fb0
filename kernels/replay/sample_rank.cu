// Rank-based prioritized draws, one block, over the live priorities sorted in descending order
// with ties by slot ascending (a stable radix sort of the leaves in slot order).
// M = number of positive sorted priorities (binary search for the first zero). Draw k takes
// mass m = draw_mass(..., H_M) with H_M = rank_prefix[M] and picks the first rank r in [1, M]
// with rank_prefix[r] > m (clamped to M), i.e. slot sorted_slots[r - 1];
// P = r^-alpha / H_M, P_min = M^-alpha / H_M, weight (P / P_min)^-beta, as CpuReplayBuffer.
// Outputs [batch] overwritten; the device step advances by one.
#include "kernels/replay/replay_sampling.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr int kSampleBlock = 256;

__global__ void __launch_bounds__(kSampleBlock)
    sample_rank(std::uint32_t* out_indices, std::uint32_t* out_generations, float* out_weights,
                const std::uint32_t* sorted_slots, const double* sorted_priorities,
                const double* rank_prefix, std::uint32_t capacity,
                const std::uint32_t* generations_now, ReplayCounters* counters,
                const double* uniforms, std::uint64_t seed, std::uint32_t batch,
                ReplayParams params) {
  __shared__ std::uint32_t live_ranked;
  const std::uint64_t step = counters->step;
  if (threadIdx.x == 0) {
    std::uint32_t lo = 0, hi = capacity;  // first index with priority <= 0
    while (lo < hi) {
      const std::uint32_t mid = lo + (hi - lo) / 2;
      if (sorted_priorities[mid] > 0.0) lo = mid + 1; else hi = mid;
    }
    live_ranked = lo;
  }
  __syncthreads();
  const std::uint32_t m = live_ranked;
  const double rank_total = rank_prefix[m];
  const double min_probability = pow(static_cast<double>(m), -params.alpha) / rank_total;
  const double beta = beta_at_step(params, step);
  for (std::uint32_t k = threadIdx.x; k < batch; k += blockDim.x) {
    const double mass =
        draw_mass(params, k, batch, draw_uniform(uniforms, seed, step, k), rank_total);
    std::uint32_t lo = 1, hi = m + 1;  // first r in [1, m] with prefix[r] > mass, else m + 1
    while (lo < hi) {
      const std::uint32_t mid = lo + (hi - lo) / 2;
      if (rank_prefix[mid] > mass) hi = mid; else lo = mid + 1;
    }
    const std::uint32_t rank = lo <= m ? lo : m;
    const std::uint32_t slot = sorted_slots[rank - 1];
    write_draw(out_indices, out_generations, out_weights, k, slot, generations_now[slot],
               is_weight(pow(static_cast<double>(rank), -params.alpha) / rank_total,
                         min_probability, beta));
  }
  __syncthreads();
  if (threadIdx.x == 0) counters->step = step + 1;
}

}  // namespace

void launch_sample_rank(std::uint32_t* out_indices, std::uint32_t* out_generations,
                        float* out_weights, const std::uint32_t* sorted_slots,
                        const double* sorted_priorities, const double* rank_prefix,
                        std::uint32_t capacity, const std::uint32_t* generations_now,
                        ReplayCounters* counters, const double* uniforms, std::uint64_t seed,
                        std::uint32_t batch, ReplayParams params, cudaStream_t stream) {
  const NvtxRange range("replay/sample_rank");
  sample_rank<<<1, kSampleBlock, 0, stream>>>(out_indices, out_generations, out_weights,
                                               sorted_slots, sorted_priorities, rank_prefix,
                                               capacity, generations_now, counters, uniforms,
                                               seed, batch, params);
  RESIDENT_CHECK_LAUNCH("sample_rank");
}

}  // namespace resident::kernels
