// The fused categorical PPO loss (contract in categorical_ppo_loss.h).
// categorical_ppo_loss_rows: ppo_loss_blocks(B) blocks of 256 threads; block b walks the 256-row
//   tiles b, b + gridDim, ... in order, each in three steps separated by barriers:
//   1. the row groups of categorical_forward (row_reduce.cuh, chosen by A alone; a group per row,
//      256 / group size rows a pass) compute each row's stats and log-prob
//      (categorical_row.cuh) into shared memory;
//   2. thread t computes the loss row of tile row t (ppo_loss_row.cuh): its metric terms go into
//      the thread's running sums, d_value to memory, d_log_prob and d_entropy to shared memory;
//   3. the row groups write the tile's d_logits from the stored stats (categorical_row.cuh's
//      backward, overwrite).
//   Thread t of block b thus visits rows b * 256 + t, then strides of gridDim * 256, as
//   ppo_loss_rows does; its block's sums reduce by the same cub::BlockReduce into the same
//   partials, and launch_ppo_loss_finalize finishes them. Every per-row value comes from the
//   same device functions as in the three-kernel sequence, so every output has its bits.
#include "kernels/rl/ppo/categorical_ppo_loss.h"

#include <string>

#include "kernels/nn/categorical_row.cuh"
#include "kernels/nn/row_reduce.cuh"
#include "kernels/rl/ppo/ppo_loss_row.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::ppo {

namespace {

constexpr unsigned kThreads = loss_row::kLossThreads;
static_assert(kThreads == rowwise::kRowThreads,
              "a tile row per loss thread, and the row groups assume kRowThreads per block");

template <class Group>
__global__ void __launch_bounds__(kThreads)
    categorical_ppo_loss_rows(float* d_logits, float* d_value, float* partials,
                              CategoricalPpoLossInputs in, std::size_t batch, std::size_t cols,
                              PpoLossCoefficients k) {
  constexpr unsigned kRowsPerPass = kThreads / Group::size();
  __shared__ loss_row::LossBlockSum::TempStorage temp;
  __shared__ categorical_row::RowStats tile_stats[kThreads];
  __shared__ float tile_log_prob[kThreads];
  __shared__ float tile_d_log_prob[kThreads];
  __shared__ float tile_d_entropy[kThreads];
  const float inverse_batch = 1.0f / static_cast<float>(batch);
  const unsigned group_slot = threadIdx.x / Group::size();  // the group's first row in a tile
  float sums[kPpoMetrics] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (std::size_t first = blockIdx.x * std::size_t{kThreads}; first < batch;
       first += std::size_t{gridDim.x} * kThreads) {
    // 1. Stats and log-probs (categorical_forward), uniform per group (per block: BlockGroup).
    for (unsigned slot = group_slot; slot < kThreads && first + slot < batch;
         slot += kRowsPerPass) {
      const std::size_t row = first + slot;
      const float* x_row = in.logits + row * cols;
      const categorical_row::RowStats stats = categorical_row::row_stats<Group>(x_row, cols, true);
      if (Group::rank() == 0) {
        tile_stats[slot] = stats;
        tile_log_prob[slot] = categorical_row::log_prob(x_row, cols, in.actions[row], stats);
      }
    }
    __syncthreads();
    // 2. The loss row (ppo_loss_rows).
    const std::size_t i = first + threadIdx.x;
    if (i < batch) {
      const loss_row::RowGrads g = loss_row::loss_row(
          sums,
          {tile_log_prob[threadIdx.x], tile_stats[threadIdx.x].entropy, in.values[i],
           in.old_log_prob[i], in.advantages[i], in.returns[i],
           k.clip_value_loss ? in.old_values[i] : 0.0f},
          k, inverse_batch);
      tile_d_log_prob[threadIdx.x] = g.d_log_prob;
      tile_d_entropy[threadIdx.x] = g.d_entropy;
      d_value[i] = g.d_value;
    }
    __syncthreads();
    // 3. d_logits (categorical_backward, overwrite).
    for (unsigned slot = group_slot; slot < kThreads && first + slot < batch;
         slot += kRowsPerPass) {
      const std::size_t row = first + slot;
      const categorical_row::Upstream up{true, tile_d_log_prob[slot], in.actions[row], true,
                                         tile_d_entropy[slot]};
      categorical_row::backward_row<Group>(d_logits + row * cols, in.logits + row * cols, cols,
                                           tile_stats[slot], up, false);
    }
    __syncthreads();  // the next tile overwrites the shared arrays
  }
  loss_row::store_block_partials(partials, sums, temp);
}

}  // namespace

void launch_categorical_ppo_loss(float* d_logits, float* d_value, float* metrics,
                                 float* metric_sums, float* partials, std::uint64_t* counter,
                                 CategoricalPpoLossInputs inputs, std::size_t batch,
                                 std::size_t actions_count, PpoLossCoefficients coefficients,
                                 cudaStream_t stream) {
  if (batch == 0 || actions_count == 0 || !(coefficients.clip > 0.0f))
    throw Error("launch_categorical_ppo_loss", "invalid argument",
                "batch = " + std::to_string(batch) + " (>= 1), actions = " +
                    std::to_string(actions_count) + " (>= 1), clip = " +
                    std::to_string(coefficients.clip) + " (> 0)",
                __FILE__, __LINE__);
  const NvtxRange range("ppo/categorical_loss");
  const std::size_t blocks = ppo_loss_blocks(batch);
  rowwise::for_row_group(actions_count, [&](auto group) {
    using Group = decltype(group);
    categorical_ppo_loss_rows<Group><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        d_logits, d_value, partials, inputs, batch, actions_count, coefficients);
  });
  RESIDENT_CHECK_LAUNCH("categorical_ppo_loss_rows");
  launch_ppo_loss_finalize(metrics, metric_sums, counter, partials, batch, stream);
}

}  // namespace resident::kernels::ppo
