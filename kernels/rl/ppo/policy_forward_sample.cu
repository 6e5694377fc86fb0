// Policy forward + action sampling in one launch (contract in policy_forward_sample.h): the fused
// MLP forward kernel (kernels/nn/mlp_forward_fused.cuh) with an epilogue that samples each row
// of the tile it just computed, reading the tile's logits back from memory (written by this
// block before the kernel's last barrier) through categorical_sample::sample_row, the code of
// launch_sample_actions. Thread i of the block samples row row0 + i of the tile (32 rows).
#include "kernels/rl/ppo/policy_forward_sample.h"

#include <string>

#include "kernels/nn/mlp_forward_fused.cuh"
#include "kernels/rl/ppo/categorical_sample.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels::ppo {

namespace {

struct SampleEpilogue {
  const float* logits;  // [rows, cols]: the forward's last-layer output
  std::size_t cols;
  std::int32_t* actions;
  SampleStore store;
  std::uint64_t philox_seed;
  const std::uint64_t* counter;

  __device__ void operator()(std::size_t row0, std::size_t rows) const {
    const std::uint64_t draw_index = *counter;
    const std::size_t r = row0 + threadIdx.x;
    if (threadIdx.x < fused_mlp::kRows && r < rows)
      categorical_sample::sample_row(actions, store, logits + r * cols, r, rows, cols,
                                     philox_seed, draw_index);
    if (store.step_slot != nullptr && row0 == 0 && threadIdx.x == 0)
      *store.step_slot = draw_index;
  }
};

}  // namespace

void launch_policy_forward_sample(const FusedMlp& policy, const float* observations,
                                  std::size_t rows, const Activation& hidden,
                                  std::int32_t* actions, SampleStore store,
                                  std::uint64_t philox_seed, const std::uint64_t* counter,
                                  cudaStream_t stream) {
  constexpr const char* kCaller = "launch_policy_forward_sample";
  if (store.steps == 0 || (store.actions != nullptr) != (store.log_prob != nullptr) ||
      actions == nullptr || counter == nullptr)
    throw Error(kCaller, "invalid argument",
                "steps = " + std::to_string(store.steps) +
                    " (>= 1); actions and counter must be set; store.actions and "
                    "store.log_prob both set or both null",
                __FILE__, __LINE__);
  if (policy.layers < 1 || policy.layers > kFusedMlpMaxLayers)
    (void)fused_mlp::plan_launch(policy, observations, rows, kCaller);  // throws, naming layers
  const NvtxRange range("ppo/policy_forward_sample");
  const FusedMlpLayer& last = policy.layer[policy.layers - 1];
  const SampleEpilogue epilogue{last.pre_activation, policy.widths[policy.layers], actions,
                                store, philox_seed, counter};
  fused_mlp::launch(policy, observations, rows, hidden, epilogue, kCaller, stream);
}

}  // namespace resident::kernels::ppo
