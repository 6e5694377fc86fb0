// PPO loss rows and their deterministic reduction (contract in ppo_loss.h). The row math and
// the block partials are ppo_loss_row.cuh's.
#include "kernels/rl/ppo/ppo_loss.h"

#include <algorithm>
#include <cmath>
#include <cub/block/block_reduce.cuh>
#include <string>

#include "kernels/rl/ppo/ppo_loss_row.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::ppo {

namespace {

constexpr unsigned kThreads = loss_row::kLossThreads;
constexpr std::size_t kMaxBlocks = 1024;

__global__ void __launch_bounds__(kThreads)
    ppo_loss_rows(PpoLossGrads grads, float* partials, PpoLossInputs in, std::size_t batch,
                  PpoLossCoefficients k) {
  __shared__ loss_row::LossBlockSum::TempStorage temp;
  const float inverse_batch = 1.0f / static_cast<float>(batch);
  float sums[kPpoMetrics] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(kThreads) + threadIdx.x; i < batch;
       i += static_cast<std::size_t>(gridDim.x) * kThreads) {
    const loss_row::RowGrads g = loss_row::loss_row(
        sums,
        {in.log_prob[i], in.entropy[i], in.values[i], in.old_log_prob[i], in.advantages[i],
         in.returns[i], k.clip_value_loss ? in.old_values[i] : 0.0f},
        k, inverse_batch);
    grads.d_log_prob[i] = g.d_log_prob;
    grads.d_entropy[i] = g.d_entropy;
    grads.d_value[i] = g.d_value;
  }
  loss_row::store_block_partials(partials, sums, temp);
}

__global__ void __launch_bounds__(kThreads)
    ppo_loss_finalize(float* metrics, float* metric_sums, std::uint64_t* counter,
                      const float* partials, std::size_t blocks, std::size_t batch) {
  using BlockSum = cub::BlockReduce<double, kThreads>;
  __shared__ typename BlockSum::TempStorage temp;
  for (std::size_t m = 0; m < kPpoMetrics; ++m) {
    double s = 0.0;
    for (std::size_t b = threadIdx.x; b < blocks; b += kThreads)
      s += static_cast<double>(partials[b * kPpoMetrics + m]);
    const double total = BlockSum(temp).Sum(s);
    if (threadIdx.x == 0) {
      const float mean = static_cast<float>(total / static_cast<double>(batch));
      metrics[m] = mean;
      metric_sums[m] += mean;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *counter += 1;
}

}  // namespace

std::size_t ppo_loss_blocks(std::size_t batch) {
  // One tile of kThreads rows per block up to kMaxBlocks (the PPO minibatch of 131072 rows: 512
  // blocks). Four tiles per block (128 blocks) made the fused loss a chain of 4 x 3 barriers per
  // block: 37.6 us on the H200 (ncu), slower than its three separate kernels.
  return std::clamp<std::size_t>((batch + kThreads - 1) / kThreads, 1, kMaxBlocks);
}

void launch_ppo_loss_finalize(float* metrics, float* metric_sums, std::uint64_t* counter,
                              const float* partials, std::size_t batch, cudaStream_t stream) {
  if (batch == 0)
    throw Error("launch_ppo_loss_finalize", "invalid argument", "batch = 0 (>= 1)", __FILE__,
                __LINE__);
  ppo_loss_finalize<<<1, kThreads, 0, stream>>>(metrics, metric_sums, counter, partials,
                                                ppo_loss_blocks(batch), batch);
  RESIDENT_CHECK_LAUNCH("ppo_loss_finalize");
}

void launch_ppo_loss(PpoLossGrads grads, float* metrics, float* metric_sums, float* partials,
                     std::uint64_t* counter, PpoLossInputs inputs, std::size_t batch,
                     PpoLossCoefficients coefficients, cudaStream_t stream) {
  if (batch == 0 || !(coefficients.clip > 0.0f))
    throw Error("launch_ppo_loss", "invalid argument",
                "batch = " + std::to_string(batch) + " (>= 1), clip = " +
                    std::to_string(coefficients.clip) + " (> 0)",
                __FILE__, __LINE__);
  const NvtxRange range("ppo/loss");
  const std::size_t blocks = ppo_loss_blocks(batch);
  ppo_loss_rows<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(grads, partials, inputs,
                                                                         batch, coefficients);
  RESIDENT_CHECK_LAUNCH("ppo_loss_rows");
  launch_ppo_loss_finalize(metrics, metric_sums, counter, partials, batch, stream);
}

}  // namespace resident::kernels::ppo
