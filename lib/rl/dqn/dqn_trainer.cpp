#include "lib/rl/dqn/dqn_trainer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>

#include "kernels/rl/dqn/dqn_loss_head.h"
#include "kernels/rl/dqn/dqn_train_step_fused.h"
#include "kernels/rl/dqn/epsilon_greedy.h"
#include "kernels/rl/dqn/episode_tracker.h"
#include "kernels/rl/dqn/target_update.h"
#include "kernels/rl/dqn/train_metrics.h"
#include "kernels/rl/dqn/transition_assembly.h"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/core/philox.h"
#include "lib/nn/regression_step.h"
#include "lib/replay/cpu_replay_buffer.h"

namespace resident::rl {

namespace {

namespace kd = kernels::dqn;

constexpr std::uint64_t kExploreStreamId = 0x44514e6578706c72ull;  // "DQNexplr"
constexpr std::uint64_t kHostSamplerStreamId = 0x4451484f53545247ull;

// A pinned host array (cudaMallocHost): the staging of the host-staged pipeline.
template <class T>
class PinnedArray {
 public:
  explicit PinnedArray(std::size_t count) : count_(count) {
    void* p = nullptr;
    RESIDENT_CUDA_CHECK(cudaMallocHost(&p, std::max<std::size_t>(count, 1) * sizeof(T)));
    data_ = static_cast<T*>(p);
  }
  ~PinnedArray() { (void)cudaFreeHost(data_); }
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;
  T* data() noexcept { return data_; }
  std::span<const T> view() const noexcept { return {data_, count_}; }
  std::size_t bytes() const noexcept { return count_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

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

const DqnConfig& validated(const DqnConfig& c) {
  validate(c);
  return c;
}

template <class T>
void d2h(T* host, const T* device, std::size_t count, cudaStream_t stream) {
  RESIDENT_CUDA_CHECK(
      cudaMemcpyAsync(host, device, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
}

template <class T>
void h2d(T* device, const T* host, std::size_t count, cudaStream_t stream) {
  RESIDENT_CUDA_CHECK(
      cudaMemcpyAsync(device, host, count * sizeof(T), cudaMemcpyHostToDevice, stream));
}

}  // namespace

struct DqnTrainer::HostStaging {
  CpuReplayBuffer replay;
  std::mt19937_64 rng;
  SampledBatch sampled;
  // One collection step's transitions, downloaded.
  PinnedArray<float> states, next_states, rewards;
  PinnedArray<std::int32_t> actions;
  PinnedArray<std::uint8_t> dones;
  // One batch, assembled on the host and uploaded.
  PinnedArray<float> batch_states, batch_next_states, batch_rewards, batch_weights;
  PinnedArray<std::int32_t> batch_actions;
  PinnedArray<std::uint8_t> batch_dones;
  // Downloaded every train step.
  PinnedArray<float> td_errors, loss;
  // The uploaded batch on the device: states then next states in one [2b, d] block (the
  // layout of the GPU replay's batches, so both pipelines run the same train step).
  DeviceBuffer<float> d_states, d_rewards, d_weights;
  DeviceBuffer<std::int32_t> d_actions;
  DeviceBuffer<std::uint8_t> d_dones;

  HostStaging(const ReplayConfig& config, std::uint64_t seed, std::size_t n, std::size_t d,
              std::size_t b)
      : replay(config),
        rng(mix_seed(seed, kHostSamplerStreamId)),
        states(n * d),
        next_states(n * d),
        rewards(n),
        actions(n),
        dones(n),
        batch_states(b * d),
        batch_next_states(b * d),
        batch_rewards(b),
        batch_weights(b),
        batch_actions(b),
        batch_dones(b),
        td_errors(b),
        loss(1),
        d_states(2 * b * d),
        d_rewards(b),
        d_weights(b),
        d_actions(b),
        d_dones(b) {}
};

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
  if (config_.fused_train_step || config_.fused_acting) {
    const std::vector<std::size_t> widths = fusable_widths();
    if (!widths.empty()) {
      set_up_online_views(widths);
      if (config_.fused_train_step) set_up_fused_step(widths);
      if (config_.fused_acting) set_up_fused_acting(widths);
    }
  }

  const ReplayConfig rc = replay_config(config_, d_);
  if (config_.pipeline == DqnPipeline::Resident)
    gpu_replay_ = std::make_unique<GpuReplayBuffer>(rc, b_, config_.seed, s);
  else
    staged_ = std::make_unique<HostStaging>(rc, config_.seed, n_, d_, b_);

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
  (void)cudaStreamSynchronize(side_stream_.get());
  (void)cudaStreamSynchronize(metrics_stream_.get());
  if (train_graph_ != nullptr) (void)cudaGraphExecDestroy(train_graph_);
  if (multi_step_graph_ != nullptr) (void)cudaGraphExecDestroy(multi_step_graph_);
}

kd::EpisodeTrackerState DqnTrainer::tracker_state() noexcept {
  return {running_return_.data(), recent_returns_.data(), tracker_counters_.data(),
          epoch_return_sum_.data(), recent_returns_.size()};
}

kd::TrainMetricsState DqnTrainer::metrics_state() noexcept {
  return {epoch_loss_sum_.data(), train_counters_.data()};
}

void DqnTrainer::collect_step(bool tracker_beside, bool& tracker_forked) {
  const cudaStream_t s = context_.stream();
  act(current_obs_.data(), config_.epsilon, tracker_counters_.data() + kd::kVectorSteps);
  env_->step(actions_.data(), s);
  kd::launch_transition_assembly(
      {trans_states_.data(), trans_next_states_.data(), trans_dones_.data(), current_obs_.data()},
      env_->sources(), n_, d_, s);
  // The tracker reads the env's rewards and end flags (the insert only reads them too) and its
  // own state; the next step's policy reads its step counter, after the join. Beside, it runs on
  // the metrics stream, free by then (on the side stream, behind the insert's tree work, a
  // multi-step graph launched it only after the gradient step: dev/dqn_step_timeline shows it).
  cudaStream_t tracker_stream = s;
  if (tracker_beside) {
    tracker_fork_.record(s);
    tracker_fork_.make_wait(metrics_stream_.get());
    tracker_forked = true;  // from here on the caller must join the metrics stream
    tracker_stream = metrics_stream_.get();
  }
  kd::launch_episode_tracker(tracker_state(), env_->rewards(), env_->terminated(),
                             env_->truncated(), n_, tracker_stream);
  if (tracker_beside) tracker_join_.record(tracker_stream);
}

std::vector<std::size_t> DqnTrainer::fusable_widths() const {
  std::vector<std::size_t> widths{d_};
  widths.insert(widths.end(), config_.hidden.begin(), config_.hidden.end());
  widths.push_back(a_);
  const nn::MlpConfig& mc = online_->mlp().config();
  // TF32 (allow_tf32) is the GEMM path's: the fused kernels compute in fp32 only.
  if (config_.dueling || config_.allow_tf32 || !mc.bias || mc.backend != nn::GemmBackend::Cublas ||
      !kernels::fused_step_supports(widths))
    return {};
  if (!kernels::fused_step_device_ok()) return {};
  return widths;
}

void DqnTrainer::set_up_online_views(const std::vector<std::size_t>& widths) {
  const nn::MlpConfig& mc = online_->mlp().config();
  const std::size_t layers = widths.size() - 1;
  fused_online_.layers = layers;
  fused_online_.hidden_activation = mc.hidden_activation;
  for (std::size_t l = 0; l <= layers; ++l) fused_online_.widths[l] = widths[l];
  for (std::size_t l = 0; l < layers; ++l) {
    const std::string weight = online_->mlp().weight_name(l), bias = online_->mlp().bias_name(l);
    fused_online_.weights[l] = online_slab_.param(weight);
    fused_online_.biases[l] = online_slab_.param(bias);
    fused_online_.weight_grads[l] = online_slab_.grad(weight);
    fused_online_.bias_grads[l] = online_slab_.grad(bias);
  }
}

void DqnTrainer::set_up_fused_step(const std::vector<std::size_t>& widths) {
  if (b_ > nn::kFusedStepMaxBatch) return;
  const nn::MlpConfig& mc = online_->mlp().config();
  const std::size_t layers = widths.size() - 1;
  const auto scratch = [&](std::size_t floats) { return fused_buffers_.emplace_back(floats).data(); };
  fused_target_.network.layers = layers;
  fused_target_.network.hidden_activation = mc.hidden_activation;
  for (std::size_t l = 0; l <= layers; ++l) fused_target_.network.widths[l] = widths[l];
  for (std::size_t l = 0; l < layers; ++l) {
    const std::string weight = online_->mlp().weight_name(l), bias = online_->mlp().bias_name(l);
    fused_target_.network.weights[l] = target_slab_.param(weight);
    fused_target_.network.biases[l] = target_slab_.param(bias);
    fused_online_scratch_.d_pre_activations[l] = scratch(b_ * widths[l + 1]);
    if (l + 1 < layers) {  // hidden: z and a of [states; next_states] and of the next states
      fused_online_scratch_.pre_activations[l] = scratch(2 * b_ * widths[l + 1]);
      fused_online_scratch_.activations[l] = scratch(2 * b_ * widths[l + 1]);
      fused_target_.scratch.pre_activations[l] = scratch(b_ * widths[l + 1]);
      fused_target_.scratch.activations[l] = scratch(b_ * widths[l + 1]);
    }
  }
  fused_online_scratch_.loss_partials = scratch(kd::dqn_fused_step_loss_partials(b_));
  const unsigned grid = kd::dqn_fused_step_grid(widths, b_, mc.hidden_activation);
  fused_norm_partials_ = DeviceBuffer<double>(grid);
  fused_online_scratch_.norm_partials = fused_norm_partials_.data();
  // Split-K of the last backward phase: its counters start at zero and every step leaves them so.
  fused_online_scratch_.split_partials = scratch(kernels::fused_step_split_partials(widths));
  fused_split_counters_ = DeviceBuffer<std::uint32_t>(kernels::fused_step_split_tiles(widths));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(fused_split_counters_.data(), 0,
                                      fused_split_counters_.bytes(), context_.stream()));
  fused_online_scratch_.split_counters = fused_split_counters_.data();
  fused_target_.params = target_slab_.params();
  fused_target_.tau = static_cast<float>(config_.tau);
  fused_target_.period = config_.target_update_period;
  const nn::ParamSlab::OptimizerViews views = online_slab_.optimizer_views();
  fused_optimizer_ = {.params = views.params, .m = views.m, .v = views.v, .grads = views.grads,
                      .decay_mask = views.decay_mask, .n = views.n, .step = views.step,
                      .norm = views.grad_norm, .grad_scale = views.clip_scale,
                      .max_norm = static_cast<float>(config_.max_grad_norm),
                      .constants = nn::adamw_constants(config_.adamw, "DqnTrainer")};
  fused_grid_ = grid;
}

void DqnTrainer::set_up_fused_acting(const std::vector<std::size_t>& widths) {
  const std::size_t layers = widths.size() - 1;
  const auto scratch = [&](std::size_t floats) { return fused_buffers_.emplace_back(floats).data(); };
  for (std::size_t l = 0; l + 1 < layers; ++l) {  // hidden z and a of the N observations
    act_scratch_.pre_activations[l] = scratch(n_ * widths[l + 1]);
    act_scratch_.activations[l] = scratch(n_ * widths[l + 1]);
  }
  act_q_ = DeviceBuffer<float>(n_ * a_);
  act_grid_ = kd::dqn_act_fused_grid(widths, n_, online_->mlp().config().hidden_activation);
}

void DqnTrainer::act(const float* observations, const kd::EpsilonSchedule& schedule,
                     const std::uint64_t* vector_step) {
  const cudaStream_t s = context_.stream();
  if (fused_acting()) {
    kd::launch_dqn_act_fused(actions_.data(), act_q_.data(), fused_online_, act_scratch_,
                             observations, n_, {schedule, vector_step, explore_seed_}, act_grid_,
                             s);
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
    if (fused_train_step()) {
      kd::launch_dqn_train_step_fused(
          {td_errors_.data(), loss_.data()}, fused_online_, fused_online_scratch_, fused_target_,
          fused_optimizer_,
          {batch.states, batch.actions, batch.rewards, batch.dones, batch.is_weights}, b_,
          {static_cast<float>(config_.gamma), config_.reward_scale, delta}, fused_grid_, s);
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
                           b_, a_, static_cast<float>(config_.gamma), config_.reward_scale, delta, s);
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
  bool update_forked = update_pending_;
  bool leaves_inserted = false;
  if (update_forked) {
    const cudaStream_t side = side_stream_.get();
    const cudaStream_t metrics = metrics_stream_.get();
    update_fork_.record(s);
    update_fork_.make_wait(side);
    update_fork_.make_wait(metrics);
    gpu_replay_->update_priorities(pending_sample_.indices, pending_sample_.generations,
                                   td_errors_.data(), b_, side);
    if (train && split_insert()) {
      gpu_replay_->insert_leaves(n_, side);
      gpu_replay_->draw_ahead(b_, side);  // the rows follow after the joins (gather_drawn)
      leaves_inserted = true;
    }
    replay_join_.record(side);
    kd::launch_train_metrics(metrics_state(), loss_.data(), td_errors_.data(), b_, metrics);
    metrics_join_.record(metrics);
    update_pending_ = false;
  }
  const bool tracker_beside = config_.overlap_side_work;
  bool tracker_forked = false;
  try {
    collect_step(tracker_beside, tracker_forked);
    if (update_forked) {
      replay_join_.make_wait(s);
      metrics_join_.make_wait(s);
      update_forked = false;
    }
    insert_and_train(train, leaves_inserted);
  } catch (...) {
    // Later work on s stays ordered after whatever was forked (a capture also needs the joins).
    if (update_forked) {
      replay_join_.make_wait(s);
      metrics_join_.make_wait(s);
    }
    if (tracker_forked) {  // re-recorded: valid whether or not the tracker was launched
      tracker_join_.record(metrics_stream_.get());
      tracker_join_.make_wait(s);
    }
    throw;
  }
  if (tracker_forked) tracker_join_.make_wait(s);  // before the next step's policy reads it
}

bool DqnTrainer::split_insert() const noexcept {
  return gpu_replay_ != nullptr && gpu_replay_->config().mode == ReplayPriorityMode::Proportional &&
         n_ <= gpu_replay_->capacity();
}

void DqnTrainer::insert_and_train(bool train, bool leaves_inserted) {
  const cudaStream_t s = context_.stream();
  const DeviceTransitions rows{trans_states_.data(), actions_.data(), env_->rewards(),
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
      pending_sample_ = sampled;  // finished beside the next step's collection
      update_pending_ = true;
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
  if (!update_pending_) return;
  finish_train_step(pending_sample_, context_.stream());
  update_pending_ = false;
}

void DqnTrainer::capture_train_steps(std::size_t steps, cudaGraphExec_t& exec) {
  const cudaStream_t s = context_.stream();
  cudaGraph_t graph = nullptr;
  // A failed capture runs nothing of the steps: the pending update stays pending.
  const bool pending_before = update_pending_;
  const DeviceSampledBatch pending_sample_before = pending_sample_;
  const GpuReplayBuffer::HostShadow replay_before = gpu_replay_->host_shadow();
  try {
    RESIDENT_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    try {
      for (std::size_t k = 0; k < steps; ++k) enqueue_step(/*train=*/true);
    } catch (...) {
      (void)cudaStreamEndCapture(s, &graph);
      if (graph != nullptr) (void)cudaGraphDestroy(graph);
      throw;
    }
    RESIDENT_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
    (void)cudaGraphDestroy(graph);
    RESIDENT_CUDA_CHECK(instantiated);
  } catch (...) {
    update_pending_ = pending_before;
    pending_sample_ = pending_sample_before;
    gpu_replay_->restore_host_shadow(replay_before);
    throw;
  }
}

void DqnTrainer::host_staged_step(bool train) {
  const NvtxRange range("dqn/host_staged_step");
  const cudaStream_t s = context_.stream();
  HostStaging& h = *staged_;
  bool tracker_forked = false;
  collect_step(/*tracker_beside=*/false, tracker_forked);
  d2h(h.states.data(), trans_states_.data(), n_ * d_, s);
  d2h(h.next_states.data(), trans_next_states_.data(), n_ * d_, s);
  d2h(h.rewards.data(), env_->rewards(), n_, s);
  d2h(h.actions.data(), actions_.data(), n_, s);
  d2h(h.dones.data(), trans_dones_.data(), n_, s);
  context_.synchronize();
  h.replay.insert_batch({h.states.view(), h.actions.view(), h.rewards.view(), h.next_states.view(),
                         h.dones.view()});
  if (!train) return;
  for (std::size_t g = 0; g < config_.gradient_steps_per_env_step; ++g) {
    h.replay.sample(b_, h.rng, h.sampled);
    std::memcpy(h.batch_states.data(), h.sampled.states.data(), h.batch_states.bytes());
    std::memcpy(h.batch_next_states.data(), h.sampled.next_states.data(),
                h.batch_next_states.bytes());
    std::memcpy(h.batch_rewards.data(), h.sampled.rewards.data(), h.batch_rewards.bytes());
    std::memcpy(h.batch_weights.data(), h.sampled.is_weights.data(), h.batch_weights.bytes());
    std::memcpy(h.batch_actions.data(), h.sampled.actions.data(), h.batch_actions.bytes());
    std::memcpy(h.batch_dones.data(), h.sampled.dones.data(), h.batch_dones.bytes());
    h2d(h.d_states.data(), h.batch_states.data(), b_ * d_, s);
    h2d(h.d_states.data() + b_ * d_, h.batch_next_states.data(), b_ * d_, s);
    h2d(h.d_rewards.data(), h.batch_rewards.data(), b_, s);
    h2d(h.d_weights.data(), h.batch_weights.data(), b_, s);
    h2d(h.d_actions.data(), h.batch_actions.data(), b_, s);
    h2d(h.d_dones.data(), h.batch_dones.data(), b_, s);
    train_on_batch({h.d_states.data(), h.d_actions.data(), h.d_rewards.data(),
                    h.d_states.data() + b_ * d_, h.d_dones.data(), h.d_weights.data(),
                    /*states_then_next_states=*/true});
    kd::launch_train_metrics(metrics_state(), loss_.data(), td_errors_.data(), b_, s);
    d2h(h.td_errors.data(), td_errors_.data(), b_, s);
    d2h(h.loss.data(), loss_.data(), 1, s);
    context_.synchronize();
    const std::uint64_t step = gradient_steps_ + g + 1;
    const std::span<const float> td = h.td_errors.view();
    const bool bad_td = std::any_of(td.begin(), td.end(), [](float v) { return !std::isfinite(v); });
    if (!std::isfinite(h.loss.data()[0]) || bad_td)
      throw Error("DqnTrainer::train_epoch", "non-finite loss or TD error",
                  "at gradient step " + std::to_string(step) + " (host-staged; loss " +
                      std::to_string(h.loss.data()[0]) + "); training stopped",
                  __FILE__, __LINE__);
    h.replay.update_priorities(h.sampled.indices, h.sampled.generations, td);
  }
}

void DqnTrainer::step(bool train) {
  if (config_.pipeline == DqnPipeline::HostStaged) {
    host_staged_step(train);
  } else if (!config_.use_graph || !train) {
    // Collection-only steps run eagerly: they are the warm-up, and the replay's host-side size
    // (which sample() checks when the train graph is captured) only counts host calls.
    enqueue_step(train);
  } else if (config_.overlap_side_work && !update_pending_) {
    // The first train step of an epoch: no update pending from a previous step, unlike the
    // steady state the train graph holds (its replays start with the pending update).
    enqueue_step(train);
  } else {
    if (train_graph_ == nullptr) capture_train_steps(1, train_graph_);
    RESIDENT_CUDA_CHECK(cudaGraphLaunch(train_graph_, context_.stream()));
    ++graph_launches_;
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
                      (!config_.overlap_side_work || update_pending_);
  if (!steady || k <= 1 || steps_left < k) {
    step(train);
    return 1;
  }
  if (multi_step_graph_ == nullptr) capture_train_steps(k, multi_step_graph_);
  RESIDENT_CUDA_CHECK(cudaGraphLaunch(multi_step_graph_, context_.stream()));
  ++graph_launches_;
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
    kd::launch_transition_assembly({trans_states_.data(), trans_next_states_.data(),
                                    trans_dones_.data(), current_obs_.data()},
                                   env_->sources(), n_, d_, s);
    kd::launch_episode_tracker(eval, env_->rewards(), env_->terminated(), env_->truncated(), n_,
                               s);
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

}  // namespace resident::rl
