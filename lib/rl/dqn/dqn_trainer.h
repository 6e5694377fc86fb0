// DqnTrainer: double DQN with prioritized replay, entirely on the GPU.
//
//   DqnTrainer trainer(config);                 // setup: allocations, env reset, init, uploads
//   for (...) { DqnEpochMetrics m = trainer.train_epoch(); }
//
// One step = one collection step (online Q on the N current observations, epsilon-greedy with
// per-env Philox draws and a device-resident step counter, env step, transition assembly,
// episode tracking, replay insert) followed by gradient_steps_per_env_step train steps (PER
// sample with IS weights, double-DQN targets from the online argmax and the target network,
// IS-weighted Huber loss, backward, global-norm clip, AdamW, hard/Polyak target update keyed by
// the device AdamW step, priority update from TD errors that never leave the device, device
// metrics). Before learning_starts transitions are stored, a step is the collection alone.
//
// Resident pipeline: a step only enqueues kernels (no allocation, copy or sync) on one stream,
// but for a step's last priority update, which runs on a second stream beside the next step's
// collection together with that step's insert's tree work (proportional replay:
// GpuReplayBuffer::insert_leaves; the rows follow with the first draw), that step's train
// metrics, on a third stream beside both, and its episode tracker, on that third stream beside
// its insert and training (DqnConfig::overlap_side_work; events order them, and the update's and
// metrics' forks join before the draw, so the gradient step depends on the draw alone). The
// steady-state train step (collection + training) is captured into CUDA graphs and replayed,
// DqnConfig::steps_per_graph steps per launch (an epoch's remainder: one-step launches;
// collection-only warm-up steps and each epoch's first train step run eagerly); an epoch is
// steps_per_epoch steps, then one summary kernel and the epoch's only host interaction: two
// 8-byte ScalarReadbacks (mean loss and recent mean return; first non-finite step and episode
// count). A non-finite loss or TD error seen by the device counters throws resident::Error naming
// the gradient step. Transfer contract: DqnEpochContract.
//
// Host-staged pipeline (config.pipeline): the same env, policy and network kernels, launched
// eagerly, with the classic round trips around a CpuReplayBuffer: transitions downloaded every
// step, batches sampled and assembled on the host and uploaded, TD errors and the loss
// downloaded every train step (pinned staging buffers), priorities updated on the host.
//
// Files: dqn_trainer.cpp the algorithm (collection, gradient step, epoch); dqn_step_schedule.h
// the side streams, the pending update and the graphs; dqn_fused_kernels.h the one-launch acting
// and gradient step; dqn_host_staged.cpp the host-staged pipeline; dqn_trainer_checkpoint.cpp
// the checkpoints.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "kernels/rl/dqn/epoch_summary.h"
#include "kernels/rl/dqn/episode_tracker.h"
#include "kernels/rl/dqn/epsilon_greedy.h"
#include "kernels/rl/dqn/train_metrics.h"
#include "lib/core/device_buffer.h"
#include "lib/core/scalar_readback.h"
#include "lib/core/stream.h"
#include "lib/nn/param_slab.h"
#include "lib/replay/gpu_replay_buffer.h"
#include "lib/replay/replay_config.h"
#include "lib/rl/dqn/dqn_config.h"
#include "lib/rl/dqn/dqn_env.h"
#include "lib/rl/dqn/q_network.h"

namespace resident::dqn {

class DqnFusedKernels;  // dqn_fused_kernels.h
class DqnStepSchedule;  // dqn_step_schedule.h

struct DqnEpochMetrics {
  std::uint64_t epoch = 0;           // epochs done, this one included
  std::uint64_t env_steps = 0;       // transitions collected so far (N per vector step)
  std::uint64_t gradient_steps = 0;  // train steps so far
  float mean_loss = 0.0f;            // mean loss of this epoch's train steps; NaN when none
  float mean_recent_return = 0.0f;   // mean return of the last return_window episodes; NaN: none
  std::uint32_t episodes = 0;        // episodes completed so far (saturating)
};

// The transfer contract of one resident epoch (tests and benches build an
// audit::TransferContract from it): no bulk D2H, no H2D, at most 2 scalar (<= 8 B) D2H and the
// 2 event waits of their readback.
struct DqnEpochContract {
  static constexpr std::uint64_t max_d2h_scalar = 2;
  static constexpr std::uint64_t max_d2h_bulk = 0;
  static constexpr std::uint64_t max_h2d = 0;
  static constexpr std::uint64_t max_syncs = 2;
};

class DqnTrainer {
 public:
  explicit DqnTrainer(const DqnConfig& config);
  ~DqnTrainer();
  DqnTrainer(const DqnTrainer&) = delete;
  DqnTrainer& operator=(const DqnTrainer&) = delete;

  // steps_per_epoch steps, then the epoch readback. Throws resident::Error on a non-finite loss
  // or TD error, naming the gradient step (the state then holds the failed step's results).
  DqnEpochMetrics train_epoch();

  // ----- checkpoint phase (blocking; resident pipeline)
  // Writes online and target parameters, AdamW state and step, the trainer's counters, device
  // metrics, tracker and policy state, the envs' whole state (dynamics, counters, Philox) and,
  // with `include_replay`, the replay's contents, trees and counters, atomically (temp +
  // rename), with a header (magic, version, config hash) and a checksum. A trainer that loads a
  // file with the replay continues bit-identically to the run that wrote it, in any process.
  // Without the replay (smaller files) the loading trainer keeps its own replay contents.
  void save_checkpoint(const std::filesystem::path& path, bool include_replay = true);
  // Validates the whole file (magic, version, checksum, config hash, slab layouts, env and
  // replay shapes) before it changes anything, then restores what save_checkpoint wrote.
  // Throws resident::Error.
  void load_checkpoint(const std::filesystem::path& path);

  // ----- evaluation and inspection (blocking; never in an epoch)
  // Runs `vector_steps` greedy steps (epsilon 0) without storing or training and returns the
  // returns of the episodes that ended, in completion order (at most max_episodes, the last
  // ones). The first episode each env ends began before the evaluation (a partial return).
  std::vector<float> evaluate_greedy(std::size_t vector_steps, std::size_t max_episodes);

  const DqnConfig& config() const noexcept { return config_; }
  const StreamContext& context() const noexcept { return context_; }
  const DqnEnv& env() const noexcept { return *env_; }
  const nn::ParamSlab& online_slab() const noexcept { return online_slab_; }
  const nn::ParamSlab& target_slab() const noexcept { return target_slab_; }
  const GpuReplayBuffer* gpu_replay() const noexcept { return gpu_replay_.get(); }
  std::uint64_t vector_steps() const noexcept { return vector_steps_; }
  std::uint64_t gradient_steps() const noexcept { return gradient_steps_; }
  std::size_t warmup_vector_steps() const noexcept { return warmup_vector_steps_; }
  // True when a gradient step is the one fused kernel (DqnConfig::fused_train_step).
  bool fused_train_step() const noexcept;
  // True when acting (forward + epsilon-greedy) is the one fused kernel (DqnConfig::fused_acting).
  bool fused_acting() const noexcept;
  // cudaGraphLaunch calls so far (one-step and steps_per_graph-step graphs together).
  std::uint64_t graph_launches() const noexcept;

 private:
  struct HostStaging;  // dqn_host_staged.cpp
  struct HostStagingDeleter {
    void operator()(HostStaging* staging) const noexcept;
  };
  struct SampleView {
    const float* states;
    const std::int32_t* actions;
    const float* rewards;
    const float* next_states;
    const std::uint8_t* dones;
    const float* is_weights;
    // next_states == states + b * d (one [2b, d] block, as the GPU replay gathers them): the
    // online network evaluates both in one forward.
    bool states_then_next_states = false;
  };

  // ----- a step
  // One whole step, eagerly or by graph replay, or (resident steady state, at least
  // steps_per_graph steps left in the epoch) steps_per_graph steps in one graph launch.
  // Returns the number of vector steps done.
  std::size_t advance(std::size_t steps_left);
  void step(bool train);          // one whole step, eagerly or by graph replay
  void enqueue_step(bool train);  // resident: the kernels of one step (what a graph captures)
  // Policy, env, assembly, tracking (no insert); the tracker beside the rest on the schedule's
  // metrics stream when `tracker_beside`.
  void collect_step(bool tracker_beside);
  // actions_ from the online network on observations [N, d] (epsilon-greedy with `schedule` at
  // *vector_step): the fused kernel, or the network's forward and the epsilon-greedy launch.
  void act(const float* observations, const kernels::dqn::EpsilonSchedule& schedule,
           const std::uint64_t* vector_step);
  // Resident: the insert (or, after insert_leaves beside the collection, only its rows, with
  // the first draw), then draws and gradient steps.
  void insert_and_train(bool train, bool leaves_inserted);
  // Whether the insert's tree work can run beside the collection (proportional replay).
  bool split_insert() const noexcept;
  void train_on_batch(const SampleView& batch);  // targets .. target update (no priorities)
  // After a gradient step's kernels: the priority update from its TD errors and the train
  // metrics (loss, non-finite counts), on `stream`.
  void finish_train_step(const DeviceSampledBatch& sampled, cudaStream_t stream);
  // Enqueues a pending finish_train_step on the main stream (train_epoch, at its end).
  void flush_pending_update();
  // Launches the graph of `steps` steady-state train steps, capturing it first when needed.
  void launch_train_graph(std::size_t steps);
  // A failed capture changes nothing on the host: the pending update stays pending.
  void capture_train_steps(std::size_t steps);
  kernels::dqn::EpisodeTrackerState tracker_state() noexcept;
  kernels::dqn::TrainMetricsState metrics_state() noexcept;

  // ----- the host-staged pipeline (dqn_host_staged.cpp)
  void set_up_host_staged(const ReplayConfig& replay);
  void host_staged_step(bool train);

  DqnConfig config_;
  StreamContext context_;
  std::unique_ptr<DqnEnv> env_;
  std::size_t n_ = 0, d_ = 0, a_ = 0, b_ = 0;
  nn::ParamSlab online_slab_, target_slab_;
  std::unique_ptr<QNetwork> online_, target_;
  std::unique_ptr<DqnFusedKernels> fused_;
  std::unique_ptr<GpuReplayBuffer> gpu_replay_;              // resident pipeline
  std::unique_ptr<HostStaging, HostStagingDeleter> staged_;  // host-staged pipeline
  std::uint64_t explore_seed_ = 0;

  // Collection: current observations, actions, assembled transitions.
  DeviceBuffer<float> current_obs_, trans_states_, trans_next_states_;
  DeviceBuffer<std::int32_t> actions_;
  DeviceBuffer<std::uint8_t> trans_dones_;
  // Episode tracker and train metrics (device accumulators).
  DeviceBuffer<float> running_return_, recent_returns_;
  DeviceBuffer<std::uint64_t> tracker_counters_, train_counters_;
  DeviceBuffer<double> epoch_return_sum_, epoch_loss_sum_;
  // Train step scratch.
  DeviceBuffer<float> td_errors_, loss_, d_q_;
  // Epoch readback.
  DeviceBuffer<kernels::dqn::EpochSummary> summary_;
  DeviceBuffer<kernels::dqn::EpochStatus> status_;
  ScalarReadback<kernels::dqn::EpochSummary> summary_readback_;
  ScalarReadback<kernels::dqn::EpochStatus> status_readback_;

  // Side streams, the pending update and the graphs (resident pipeline).
  std::unique_ptr<DqnStepSchedule> schedule_;
  std::size_t warmup_vector_steps_ = 0;
  std::uint64_t vector_steps_ = 0, gradient_steps_ = 0, epoch_ = 0;
};

}  // namespace resident::dqn
