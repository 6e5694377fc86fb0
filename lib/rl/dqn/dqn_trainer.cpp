#include "lib/rl/dqn/dqn_trainer.h"

#include <algorithm>
#include <optional>
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/core/philox.h"
#include "kernels/rl/dqn/dqn_loss_head.h"
#include "kernels/rl/dqn/episode_tracker.h"
#include "kernels/rl/dqn/epsilon_greedy.h"
#include "kernels/rl/dqn/target_update.h"
#include "kernels/rl/dqn/train_metrics.h"
#include "kernels/rl/dqn/transition_assembly.h"
#include "lib/rl/dqn/dqn_fused_kernels.h"
#include "lib/rl/dqn/dqn_step_schedule.h"

namespace resident::dqn {

namespace kd = kernels::dqn;

namespace {

constexpr std::uint64_t kExploreStreamId = 0x44514e6578706c72ull;  // "DQNexplr"

ReplayConfig replay_config(const DqnConfig& c, std::size_t state_dim) {
  ReplayConfig r;
  r.capacity = c.replay_capacity;
  r.state_dim = state_dim;
  r.alpha = c.priority_alpha;
  r.beta_start = c.beta_start;
  r.beta_max = c.beta_max;
  r.beta_annealing_steps = c.beta_annealing_steps;
  r.epsilon = c.priority_epsilon;
  return r;
}

// The env's step as the transition assembly reads it: s' is the final observation where the
// episode ended, else the observation after the step (no reset happened there).
kd::TransitionSources transition_sources(const VectorEnvStep& step) {
  return {.observations = step.observations,
          .next_observations = step.observations,
          .final_observations = step.final_observations,
          .terminated = step.terminated,
          .truncated = step.truncated};
}

const DqnConfig& validated(const DqnConfig& c) {
  validate(c);
  return c;
}

}  // namespace

DqnTrainer::DqnTrainer(const DqnConfig& config)
    : config_(validated(config)),
      context_(StreamContextOptions{.allow_tf32 = config.allow_tf32}) {
  const cudaStream_t s = context_.stream();
  env_ = std::make_unique<DqnEnv>(config_, s);
  n_ = env_->env_count();
  d_ = env_->observation_size();
  a_ = env_->action_count();
  b_ = config_.batch;
  const QNetworkShape shape{d_, a_, config_.hidden, config_.dueling};
  const std::size_t max_batch = std::max(n_, b_);
  // The online network also takes [states; next_states] of a batch in one forward (2b rows:
  // train_on_batch). max_batch sizes the arena only: both slabs keep the same layout.
  online_ = std::make_unique<QNetwork>(shape, std::max(max_batch, 2 * b_), online_slab_);
  target_ = std::make_unique<QNetwork>(shape, max_batch, target_slab_);
  online_slab_.finalize();
  target_slab_.finalize();
  // Same seed, same deterministic init: the target starts equal to the online network.
  const std::uint64_t init_seed = mix_seed(config_.seed, 0x445141696e697421ull);
  online_->bind(init_seed, s);
  target_->bind(init_seed, s);
  explore_seed_ = mix_seed(config_.seed, kExploreStreamId);
  fused_ =
      std::make_unique<DqnFusedKernels>(config_, *online_, online_slab_, target_slab_, n_, b_, s);

  const ReplayConfig rc = replay_config(config_, d_);
  if (config_.pipeline == DqnPipeline::Resident)
    gpu_replay_ = std::make_unique<GpuReplayBuffer>(rc, b_, config_.seed, s);
  else
    set_up_host_staged(rc);
  schedule_ = std::make_unique<DqnStepSchedule>();

  current_obs_ = DeviceBuffer<float>(n_ * d_);
  trans_states_ = DeviceBuffer<float>(n_ * d_);
  trans_next_states_ = DeviceBuffer<float>(n_ * d_);
  actions_ = DeviceBuffer<std::int32_t>(n_);
  trans_dones_ = DeviceBuffer<std::uint8_t>(n_);
  running_return_ = DeviceBuffer<float>(n_);
  recent_returns_ = DeviceBuffer<float>(config_.return_window);
  tracker_counters_ = DeviceBuffer<std::uint64_t>(kd::kTrackerCounterCount);
  train_counters_ = DeviceBuffer<std::uint64_t>(kd::kTrainCounterCount);
  epoch_return_sum_ = DeviceBuffer<double>(1);
  epoch_loss_sum_ = DeviceBuffer<double>(1);
  td_errors_ = DeviceBuffer<float>(b_);
  loss_ = DeviceBuffer<float>(1);
  d_q_ = DeviceBuffer<float>(b_ * a_);
  summary_ = DeviceBuffer<kd::EpochSummary>(1);
  status_ = DeviceBuffer<kd::EpochStatus>(1);

  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(current_obs_.data(), env_->observations(),
                                      current_obs_.bytes(), cudaMemcpyDeviceToDevice, s));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(running_return_.data(), 0, running_return_.bytes(), s));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(recent_returns_.data(), 0, recent_returns_.bytes(), s));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(tracker_counters_.data(), 0, tracker_counters_.bytes(), s));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(train_counters_.data(), 0, train_counters_.bytes(), s));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(epoch_return_sum_.data(), 0, epoch_return_sum_.bytes(), s));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(epoch_loss_sum_.data(), 0, epoch_loss_sum_.bytes(), s));
  context_.synchronize();
  warmup_vector_steps_ = (config_.learning_starts + n_ - 1) / n_;
}

DqnTrainer::~DqnTrainer() {
  // Pending side work reads buffers freed below.
  if (schedule_) schedule_->synchronize_side_streams();
}

bool DqnTrainer::fused_train_step() const noexcept { return fused_->train_step(); }
bool DqnTrainer::fused_acting() const noexcept { return fused_->acting(); }
std::uint64_t DqnTrainer::graph_launches() const noexcept { return schedule_->graph_launches(); }

kd::EpisodeTrackerState DqnTrainer::tracker_state() noexcept {
  return {running_return_.data(), recent_returns_.data(), tracker_counters_.data(),
          epoch_return_sum_.data(), recent_returns_.size()};
}

kd::TrainMetricsState DqnTrainer::metrics_state() noexcept {
  return {epoch_loss_sum_.data(), train_counters_.data()};
}

void DqnTrainer::collect_step(bool tracker_beside) {
  const cudaStream_t s = context_.stream();
  act(current_obs_.data(), config_.epsilon, tracker_counters_.data() + kd::kVectorSteps);
  env_->step(actions_.data(), s);
  const VectorEnvStep out = env_->step_outputs();
  kd::launch_transition_assembly(
      {trans_states_.data(), trans_next_states_.data(), trans_dones_.data(), current_obs_.data()},
      transition_sources(out), n_, d_, s);
  // The tracker reads the env's rewards and end flags (the insert only reads them too) and its
  // own state; the next step's policy reads its step counter, after the join. Beside, it runs on
  // the metrics stream, free by then (on the side stream, behind the insert's tree work, a
  // multi-step graph launched it only after the gradient step: dev/dqn_step_timeline shows it).
  const auto track = [&](cudaStream_t stream) {
    kd::launch_episode_tracker(tracker_state(), out.rewards, out.terminated, out.truncated, n_,
                               stream);
  };
  if (tracker_beside)
    schedule_->fork_tracker(s, track);
  else
    track(s);
}

void DqnTrainer::act(const float* observations, const kd::EpsilonSchedule& schedule,
                     const std::uint64_t* vector_step) {
  const cudaStream_t s = context_.stream();
  if (fused_->acting()) {
    fused_->act(actions_.data(), observations, {schedule, vector_step, explore_seed_}, s);
    return;
  }
  const float* q = online_->forward(context_, observations, n_);
  kd::launch_epsilon_greedy(actions_.data(), q, n_, a_, schedule, vector_step, explore_seed_, s);
}

void DqnTrainer::train_on_batch(const SampleView& batch) {
  const cudaStream_t s = context_.stream();
  const float delta = static_cast<float>(config_.huber_delta);
  // The online Q-values of s and s': one forward of the 2b rows [states; next_states] when the
  // batch is one block (the GPU replay's batches; the host-staged ones are two uploads), its
  // first b rows Q(s); else two. The backward below reads the first b rows of the saved
  // activations either way.
  const float* q = nullptr;
  const float* q_next_online = nullptr;
  if (batch.states_then_next_states) {
    if (batch.next_states != batch.states + b_ * d_)
      throw Error("DqnTrainer::train_on_batch", "internal error",
                  "a batch said to be one [2b, d] block is not", __FILE__, __LINE__);
    if (fused_->train_step()) {
      fused_->train({td_errors_.data(), loss_.data()},
                    {batch.states, batch.actions, batch.rewards, batch.dones, batch.is_weights},
                    {static_cast<float>(config_.gamma), config_.reward_scale, delta}, s);
      return;
    }
    q = online_->forward(context_, batch.states, 2 * b_);
    q_next_online = q + b_ * a_;
  } else {
    q_next_online = online_->forward(context_, batch.next_states, b_);
  }
  const float* q_next_target = target_->forward(context_, batch.next_states, b_);
  if (q == nullptr) q = online_->forward(context_, batch.states, b_);
  // Targets, TD errors, the weighted Huber loss and d loss / dQ in one launch; the backward
  // then overwrites every grad of the online network (no zeroing).
  kd::launch_dqn_loss_head({td_errors_.data(), loss_.data(), d_q_.data()},
                           {q, q_next_online, q_next_target, batch.actions, batch.rewards,
                            batch.dones, batch.is_weights},
                           b_, a_, static_cast<float>(config_.gamma), config_.reward_scale, delta,
                           s);
  online_->backward(context_, batch.states, d_q_.data(), b_, nn::GradMode::Overwrite);
  online_slab_.clip_and_adamw_step(static_cast<float>(config_.max_grad_norm), config_.adamw, s);
  kd::launch_target_update(target_slab_.params(), online_slab_.params(),
                           online_slab_.total_elements(), static_cast<float>(config_.tau),
                           config_.target_update_period, online_slab_.step_counter(), s);
}

void DqnTrainer::enqueue_step(bool train) {
  const NvtxRange range("dqn/step");
  const cudaStream_t s = context_.stream();
  // The previous step's last priority update and train metrics beside this step's collection:
  // they read that step's sample views, td_errors_ and loss_, which nothing here rewrites before
  // the joins but this step's draw_ahead, after the update on its stream (the metrics read only
  // td_errors_ and loss_), and write the replay and the train counters, which the collection
  // does not touch.
  // After the update, this step's insert writes its leaves on the same stream (the tree work
  // does not need the rows: GpuReplayBuffer::insert_leaves), and the first draw of this step
  // follows there too (its slots and weights need only the trees: draw_ahead); the rows (the
  // insert's and the drawn ones) follow after the joins (gather_drawn).
  // The metrics run on a third stream beside both (they only read what the update reads). Both
  // join before the insert or the gather (which read the replay; the gradient step after them
  // rewrites loss_ and td_errors_), so the gradient step depends on the gather alone and keeps
  // its programmatic early start. (This step's episode tracker forks onto the metrics stream in
  // collect_step and joins at the end.)
  bool leaves_inserted = false;
  if (const std::optional<DeviceSampledBatch> pending = schedule_->pending_update()) {
    schedule_->fork_pending_update(
        s,
        [&](cudaStream_t side) {
          gpu_replay_->update_priorities(pending->indices, pending->generations,
                                         td_errors_.data(), b_, side);
          if (train && split_insert()) {
            gpu_replay_->insert_leaves(n_, side);
            gpu_replay_->draw_ahead(b_, side);  // the rows follow after the joins (gather_drawn)
            leaves_inserted = true;
          }
        },
        [&](cudaStream_t metrics) {
          kd::launch_train_metrics(metrics_state(), loss_.data(), td_errors_.data(), b_, metrics);
        });
  }
  try {
    collect_step(/*tracker_beside=*/config_.overlap_side_work);
    schedule_->join_update(s);
    insert_and_train(train, leaves_inserted);
  } catch (...) {
    // Later work on s stays ordered after whatever was forked (a capture also needs the joins).
    schedule_->join_after_failure(s);
    throw;
  }
  schedule_->join_tracker(s);  // before the next step's policy reads it
}

bool DqnTrainer::split_insert() const noexcept {
  return gpu_replay_ != nullptr && gpu_replay_->config().mode == ReplayPriorityMode::Proportional &&
         n_ <= gpu_replay_->capacity();
}

void DqnTrainer::insert_and_train(bool train, bool leaves_inserted) {
  const cudaStream_t s = context_.stream();
  const DeviceTransitions rows{trans_states_.data(), actions_.data(), env_->step_outputs().rewards,
                               trans_next_states_.data(), trans_dones_.data()};
  if (!leaves_inserted) gpu_replay_->insert_batch(rows, n_);
  if (!train) return;
  for (std::size_t g = 0; g < config_.gradient_steps_per_env_step; ++g) {
    const DeviceSampledBatch sampled = g == 0 && leaves_inserted
                                           ? gpu_replay_->gather_drawn(rows, n_)
                                           : gpu_replay_->sample(b_);
    train_on_batch({sampled.states, sampled.actions, sampled.rewards, sampled.next_states,
                    sampled.dones, sampled.is_weights, /*states_then_next_states=*/true});
    if (config_.overlap_side_work && g + 1 == config_.gradient_steps_per_env_step) {
      schedule_->set_pending_update(sampled);  // finished beside the next step's collection
    } else {
      finish_train_step(sampled, s);
    }
  }
}

void DqnTrainer::finish_train_step(const DeviceSampledBatch& sampled, cudaStream_t stream) {
  gpu_replay_->update_priorities(sampled.indices, sampled.generations, td_errors_.data(), b_,
                                 stream);
  kd::launch_train_metrics(metrics_state(), loss_.data(), td_errors_.data(), b_, stream);
}

void DqnTrainer::flush_pending_update() {
  const std::optional<DeviceSampledBatch> pending = schedule_->pending_update();
  if (!pending) return;
  finish_train_step(*pending, context_.stream());
  schedule_->set_pending_update(std::nullopt);
}

void DqnTrainer::launch_train_graph(std::size_t steps) {
  if (!schedule_->graph_captured(steps)) capture_train_steps(steps);
  schedule_->launch_graph(steps, context_.stream());
}

void DqnTrainer::capture_train_steps(std::size_t steps) {
  // A failed capture runs nothing of the steps: the pending update stays pending.
  const std::optional<DeviceSampledBatch> pending_before = schedule_->pending_update();
  const GpuReplayBuffer::HostShadow replay_before = gpu_replay_->host_shadow();
  try {
    schedule_->capture_graph(steps, context_.stream(), [&] {
      for (std::size_t k = 0; k < steps; ++k) enqueue_step(/*train=*/true);
    });
  } catch (...) {
    schedule_->set_pending_update(pending_before);
    gpu_replay_->restore_host_shadow(replay_before);
    throw;
  }
}

void DqnTrainer::step(bool train) {
  if (config_.pipeline == DqnPipeline::HostStaged) {
    host_staged_step(train);
  } else if (!config_.use_graph || !train) {
    // Collection-only steps run eagerly: they are the warm-up, and the replay's host-side size
    // (which sample() checks when the train graph is captured) only counts host calls.
    enqueue_step(train);
  } else if (config_.overlap_side_work && !schedule_->pending_update()) {
    // The first train step of an epoch: no update pending from a previous step, unlike the
    // steady state the train graph holds (its replays start with the pending update).
    enqueue_step(train);
  } else {
    launch_train_graph(1);
  }
  ++vector_steps_;
  if (train) gradient_steps_ += config_.gradient_steps_per_env_step;
}

std::size_t DqnTrainer::advance(std::size_t steps_left) {
  const std::size_t k = config_.steps_per_graph;
  const bool train = vector_steps_ >= warmup_vector_steps_;
  // The steady state step() replays one step of; the steps of one launch are the same graph
  // nodes enqueue_step captures one after another, so the work and its order are the same.
  const bool steady = config_.pipeline == DqnPipeline::Resident && config_.use_graph && train &&
                      (!config_.overlap_side_work || schedule_->pending_update());
  if (!steady || k <= 1 || steps_left < k) {
    step(train);
    return 1;
  }
  launch_train_graph(k);
  vector_steps_ += k;
  gradient_steps_ += k * config_.gradient_steps_per_env_step;
  return k;
}

DqnEpochMetrics DqnTrainer::train_epoch() {
  const NvtxRange range("dqn/epoch");
  const cudaStream_t s = context_.stream();
  for (std::size_t done = 0; done < config_.steps_per_epoch;)
    done += advance(config_.steps_per_epoch - done);
  flush_pending_update();  // an epoch's work is complete when it returns
  kd::launch_epoch_summary(summary_.data(), status_.data(), metrics_state(), tracker_state(), s);
  summary_readback_.enqueue(summary_.data(), s);
  status_readback_.enqueue(status_.data(), s);
  const kd::EpochSummary summary = summary_readback_.wait();
  const kd::EpochStatus status = status_readback_.wait();
  ++epoch_;
  if (status.first_nonfinite_step != 0)
    throw Error("DqnTrainer::train_epoch", "non-finite loss or TD error",
                "first at gradient step " + std::to_string(status.first_nonfinite_step) +
                    " (epoch " + std::to_string(epoch_) + ", gradient steps " +
                    std::to_string(gradient_steps_) + " done); training stopped",
                __FILE__, __LINE__);
  DqnEpochMetrics m;
  m.epoch = epoch_;
  m.env_steps = vector_steps_ * n_;
  m.gradient_steps = gradient_steps_;
  m.mean_loss = summary.mean_loss;
  m.mean_recent_return = summary.mean_recent_return;
  m.episodes = status.episodes;
  return m;
}

std::vector<float> DqnTrainer::evaluate_greedy(std::size_t vector_steps, std::size_t max_episodes) {
  if (max_episodes == 0)
    throw Error("DqnTrainer::evaluate_greedy", "invalid argument", "max_episodes = 0, allowed >= 1",
                __FILE__, __LINE__);
  const cudaStream_t s = context_.stream();
  DeviceBuffer<float> running(n_), ring(max_episodes);
  DeviceBuffer<std::uint64_t> counters(kd::kTrackerCounterCount);
  DeviceBuffer<double> sum(1);
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(running.data(), 0, running.bytes(), s));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(counters.data(), 0, counters.bytes(), s));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(sum.data(), 0, sum.bytes(), s));
  const kd::EpisodeTrackerState eval{running.data(), ring.data(), counters.data(), sum.data(),
                                     max_episodes};
  const kd::EpsilonSchedule greedy{0.0, 0.0, 0};
  for (std::size_t k = 0; k < vector_steps; ++k) {
    act(current_obs_.data(), greedy, counters.data() + kd::kVectorSteps);
    env_->step(actions_.data(), s);
    const VectorEnvStep out = env_->step_outputs();
    kd::launch_transition_assembly({trans_states_.data(), trans_next_states_.data(),
                                    trans_dones_.data(), current_obs_.data()},
                                   transition_sources(out), n_, d_, s);
    kd::launch_episode_tracker(eval, out.rewards, out.terminated, out.truncated, n_, s);
  }
  context_.synchronize();
  const std::vector<std::uint64_t> c = counters.download();
  const std::vector<float> slots = ring.download();
  const std::uint64_t ended = c[kd::kEpisodesCompleted];
  const std::uint64_t kept = std::min<std::uint64_t>(ended, max_episodes);
  std::vector<float> returns;
  for (std::uint64_t k = ended - kept; k < ended; ++k) returns.push_back(slots[k % max_episodes]);
  return returns;
}

}  // namespace resident::dqn
