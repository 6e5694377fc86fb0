// PpoTrainer: PPO (Schulman et al. 2017) with a categorical policy, trained on N environments
// stepped on the GPU. Actor and critic are two tanh MLPs in one ParamSlab (one AdamW, one global
// gradient norm over both).
//
// Resident mode, per update (train_update()):
//   rollout, T capturable steps: actor forward on the env's observations -> Philox sampling
//     (action, log-prob stored at row t) -> env step -> store reward/done/final observation;
//   finish: one batched critic pass over every stored observation and every final observation
//     (values [T + 1, N] and the truncation bootstraps V(final_observation) [T, N]), GAE in one
//     kernel, advantage normalization over the rollout, episode statistics;
//   K epochs: a device permutation (Philox keys, CUB radix sort), then M capturable minibatch
//     updates: gather -> actor and critic forward -> one fused pass from the logits (categorical
//     log-prob/entropy, clipped loss, its gradients and metrics, categorical backward:
//     categorical_ppo_loss.h) and the loss finalize -> both backwards -> global-norm
//     clip and AdamW (two kernels), the lr annealed by the slab's device-side schedule
//     (adamw_config(): one lr per update, from the AdamW step counter);
//   summary: the update's mean losses and the episodic return on the device.
// Then exactly three scalars come back through ScalarReadback: the mean policy loss, the mean
// value loss, and (8 bytes) the episodic-return mean and episode count. With use_graphs the
// whole update is one CUDA graph launch.
//
// Every random draw is keyed by a device-resident counter (sampling: env steps taken; the
// permutation: minibatch updates done), so graph replays draw fresh values and a run is
// reproducible bit for bit; checkpoints save those counters.
//
// Host-staged mode (config.mode) runs the classic pipeline for comparison: see ppo_config.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include "kernels/rl/ppo/ppo_loss.h"
#include "kernels/rl/ppo/update_summary.h"
#include "lib/core/captured_graph.h"
#include "lib/core/device_buffer.h"
#include "lib/core/scalar_readback.h"
#include "lib/core/scratch_arena.h"
#include "lib/core/stream.h"
#include "lib/env/vector_env.h"
#include "lib/nn/mlp.h"
#include "lib/nn/param_slab.h"
#include "lib/rl/ppo/ppo_config.h"

namespace resident::ppo {

struct HostRollout;  // ppo_host_staged.cpp

struct PpoUpdateResult {
  float policy_loss = 0.0f;         // mean over the update's K * M minibatches
  float value_loss = 0.0f;
  float mean_episode_return = 0.0f;  // of the episodes that ended during the rollout; NaN if none
  std::uint32_t episodes = 0;
};

// Device views of the rollout, time-major (t, n) at t * N + n (tests read them).
struct PpoRolloutView {
  const float* observations = nullptr;        // [T + 1, N, D]
  const float* final_observations = nullptr;  // [T, N, D]
  const float* values = nullptr;              // [T + 1, N]
  const float* final_values = nullptr;        // [T, N]
  const std::int32_t* actions = nullptr;      // [T, N]
  const float* log_prob = nullptr;            // [T, N]
  const float* rewards = nullptr;             // [T, N]
  const std::uint8_t* terminated = nullptr;   // [T, N]
  const std::uint8_t* truncated = nullptr;    // [T, N]
  const float* advantages = nullptr;          // [T, N] (normalized when configured)
  const float* returns = nullptr;             // [T, N]
};

class PpoTrainer {
 public:
  // Validates the config (resident::Error naming the field), checks the env's sizes against it,
  // allocates everything, initializes the networks (orthogonal, from config.seed), resets the
  // env from config.seed and synchronizes (setup phase). `env` must outlive the trainer.
  PpoTrainer(const PpoConfig& config, VectorEnv& env);
  ~PpoTrainer();
  PpoTrainer(const PpoTrainer&) = delete;
  PpoTrainer& operator=(const PpoTrainer&) = delete;

  // One update (rollout + K x M minibatches) in the configured mode, then the three readbacks.
  PpoUpdateResult train_update();

  // ----- resident pieces (enqueue only; each capturable; train_update's order)
  void begin_rollout();     // observation row 0 = the env's current observations
  void rollout_step();      // one step of all N envs
  void finish_rollout();    // values, GAE, normalization, episode statistics
  void begin_epoch();       // a new permutation
  void minibatch_update();  // gather + train one minibatch
  void finish_update();     // the summary scalars
  void enqueue_update();    // all of the above for one update
  // Enqueues the three readbacks and waits (the update's one host synchronization point).
  PpoUpdateResult read_update_result();

  // ----- checkpoint phase (blocking). Saves between updates: model, AdamW state, device
  // counters, update count, host RNG and the env state; load() restores them so that the next
  // updates equal an uninterrupted run bit for bit. A file of another configuration, a corrupt
  // or foreign file throws resident::Error before anything changes.
  void save(const std::filesystem::path& path);
  void load(const std::filesystem::path& path);

  // ----- views
  const PpoConfig& config() const noexcept { return config_; }
  const StreamContext& context() const noexcept { return context_; }
  cudaStream_t stream() const noexcept { return context_.stream(); }
  nn::ParamSlab& slab() noexcept { return slab_; }
  const nn::ParamSlab& slab() const noexcept { return slab_; }
  PpoRolloutView rollout() const noexcept;
  const float* update_metrics() const noexcept { return update_metrics_.data(); }  // [kPpoMetrics]
  const float* minibatch_metrics() const noexcept { return metrics_.data(); }     // [kPpoMetrics]
  // [3]: env steps sampled, step slot, minibatch updates done.
  const std::uint64_t* device_counters() const noexcept { return counters_.data(); }
  std::uint64_t updates_done() const noexcept { return updates_done_; }

 private:
  void train_minibatch();  // on the minibatch buffers (gathered or uploaded)
  void evaluate_values();
  PpoUpdateResult train_update_host_staged();
  void host_rollout(HostRollout& rollout);

  PpoConfig config_;
  VectorEnv& env_;
  std::size_t envs_, steps_, obs_size_, actions_count_, samples_, batch_;
  StreamContext context_;
  nn::ParamSlab slab_;
  std::unique_ptr<nn::Mlp> actor_, critic_;
  std::unique_ptr<ScratchArena> arena_;
  std::size_t critic_chunk_ = 0;
  std::uint64_t sample_seed_ = 0, permutation_seed_ = 0;
  nn::AdamWConfig adamw_;

  // rollout
  DeviceBuffer<float> eval_inputs_;  // [(2T + 1) N, D]: observations [T + 1, N, D], then finals
  DeviceBuffer<float> eval_values_;  // [(2T + 1) N]: values [T + 1, N], then final values
  DeviceBuffer<std::int32_t> actions_, step_actions_;
  DeviceBuffer<float> log_prob_, rewards_, advantages_, returns_;
  DeviceBuffer<std::uint8_t> terminated_, truncated_;
  DeviceBuffer<std::uint64_t> counters_;
  DeviceBuffer<double> normalize_partials_;
  // update
  DeviceBuffer<std::uint32_t> permutation_, keys_in_, keys_out_, values_in_;
  DeviceBuffer<std::byte> sort_temp_;
  DeviceBuffer<float> mb_observations_, mb_log_prob_, mb_advantages_, mb_returns_, mb_values_;
  DeviceBuffer<std::int32_t> mb_actions_;
  DeviceBuffer<float> d_value_, d_logits_;
  DeviceBuffer<float> metrics_, metric_sums_, update_metrics_, loss_partials_;
  DeviceBuffer<kernels::ppo::EpisodeSummary> summary_;
  DeviceBuffer<float> probabilities_;  // host-staged: [N, A]
  ScalarReadback<float> policy_readback_, value_readback_;
  ScalarReadback<kernels::ppo::EpisodeSummary> episode_readback_;
  CapturedGraph update_graph_;
  std::uint64_t updates_done_ = 0;
  std::mt19937_64 host_rng_;
};

}  // namespace resident::ppo
