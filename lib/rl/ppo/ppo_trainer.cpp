#include "lib/rl/ppo/ppo_trainer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/rl/ppo/categorical_ppo_loss.h"
#include "kernels/rl/ppo/gae.h"
#include "kernels/rl/ppo/gather_minibatch.h"
#include "kernels/rl/ppo/normalize_advantages.h"
#include "kernels/rl/ppo/permutation.h"
#include "kernels/rl/ppo/policy_forward_sample.h"
#include "kernels/rl/ppo/sample_actions.h"
#include "kernels/rl/ppo/store_transition.h"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/core/philox.h"
#include "lib/rl/ppo/ppo_init.h"

namespace resident::ppo {

namespace kp = kernels::ppo;

namespace {

constexpr std::uint64_t kSampleStream = 0x50504f5f53616d70ull;       // "PPO_Samp"
constexpr std::uint64_t kPermutationStream = 0x50504f5f5065726dull;  // "PPO_Perm"
constexpr std::uint64_t kInitStream = 0x50504f5f496e6974ull;         // "PPO_Init"
constexpr std::size_t kCounters = 3;  // env steps sampled, step slot, minibatch updates

std::vector<std::size_t> widths(std::size_t in, const std::vector<std::size_t>& hidden,
                                std::size_t out) {
  std::vector<std::size_t> w{in};
  w.insert(w.end(), hidden.begin(), hidden.end());
  w.push_back(out);
  return w;
}

// The env's step outputs as the rollout store takes them.
kp::EnvStepOutputs store_inputs(const VectorEnvStep& step) {
  return {step.rewards, step.terminated, step.truncated, step.final_observations,
          step.observations};
}

const PpoConfig& validated(const PpoConfig& config) {
  validate(config);
  return config;
}

}  // namespace

PpoTrainer::PpoTrainer(const PpoConfig& config, VectorEnv& env)
    : config_(validated(config)),
      env_(env),
      envs_(config.env_count),
      steps_(config.rollout_steps),
      obs_size_(env.observation_size()),
      actions_count_(env.action_count()),
      samples_(rollout_samples(config)),
      batch_(minibatch_size(config)),
      host_rng_(config.seed) {
  if (env.env_count() != envs_ || obs_size_ == 0 || actions_count_ == 0)
    throw Error("PpoTrainer", "invalid config",
                "env has " + std::to_string(env.env_count()) + " envs (config.env_count = " +
                    std::to_string(envs_) + "), observation size " + std::to_string(obs_size_) +
                    " and " + std::to_string(actions_count_) + " actions (both >= 1)",
                __FILE__, __LINE__);
  const NvtxRange range("ppo/setup");
  const std::size_t eval_rows = (2 * steps_ + 1) * envs_;
  critic_chunk_ = std::max({batch_, envs_, std::min<std::size_t>(eval_rows, 65536)});
  const kernels::Activation tanh{kernels::ActivationKind::Tanh};
  actor_ = std::make_unique<nn::Mlp>(
      nn::MlpConfig{widths(obs_size_, config_.hidden, actions_count_), tanh, true, "actor"},
      std::max(envs_, batch_), slab_);
  critic_ = std::make_unique<nn::Mlp>(
      nn::MlpConfig{widths(obs_size_, config_.hidden, 1), tanh, true, "critic"}, critic_chunk_,
      slab_);
  slab_.finalize();
  ScratchPlan plan;
  actor_->plan(plan);
  critic_->plan(plan);
  arena_ = std::make_unique<ScratchArena>(plan.bytes());
  actor_->bind(*arena_);
  critic_->bind(*arena_);

  // CleanRL's layer_init: orthogonal, gain sqrt(2) for hidden layers, 0.01 for the policy head,
  // 1 for the value head; biases stay 0 (finalize zeroed them).
  std::mt19937_64 init_rng(mix_seed(config_.seed, kInitStream));
  for (nn::Mlp* mlp : {actor_.get(), critic_.get()}) {
    const auto& w = mlp->config().widths;
    for (std::size_t l = 0; l < mlp->layers(); ++l) {
      const bool head = l + 1 == mlp->layers();
      const double gain = !head ? std::sqrt(2.0) : (mlp == actor_.get() ? 0.01 : 1.0);
      slab_.upload(nn::SlabPart::Params, mlp->weight_name(l),
                   orthogonal_matrix(w[l + 1], w[l], gain, init_rng), stream());
    }
  }
  adamw_ = adamw_config(config_);
  sample_seed_ = mix_seed(config_.seed, kSampleStream);
  permutation_seed_ = mix_seed(config_.seed, kPermutationStream);

  eval_inputs_ = DeviceBuffer<float>(eval_rows * obs_size_);
  eval_values_ = DeviceBuffer<float>(eval_rows);
  actions_ = DeviceBuffer<std::int32_t>(samples_);
  step_actions_ = DeviceBuffer<std::int32_t>(envs_);
  log_prob_ = DeviceBuffer<float>(samples_);
  rewards_ = DeviceBuffer<float>(samples_);
  advantages_ = DeviceBuffer<float>(samples_);
  returns_ = DeviceBuffer<float>(samples_);
  terminated_ = DeviceBuffer<std::uint8_t>(samples_);
  truncated_ = DeviceBuffer<std::uint8_t>(samples_);
  counters_ = DeviceBuffer<std::uint64_t>(kCounters);
  normalize_partials_ = DeviceBuffer<double>(kp::normalize_partials_count(samples_));
  permutation_ = DeviceBuffer<std::uint32_t>(samples_);
  keys_in_ = DeviceBuffer<std::uint32_t>(samples_);
  keys_out_ = DeviceBuffer<std::uint32_t>(samples_);
  values_in_ = DeviceBuffer<std::uint32_t>(samples_);
  sort_temp_ = DeviceBuffer<std::byte>(std::max<std::size_t>(kp::permutation_temp_bytes(samples_), 1));
  mb_observations_ = DeviceBuffer<float>(batch_ * obs_size_);
  mb_log_prob_ = DeviceBuffer<float>(batch_);
  mb_advantages_ = DeviceBuffer<float>(batch_);
  mb_returns_ = DeviceBuffer<float>(batch_);
  mb_values_ = DeviceBuffer<float>(batch_);
  mb_actions_ = DeviceBuffer<std::int32_t>(batch_);
  d_value_ = DeviceBuffer<float>(batch_);
  d_logits_ = DeviceBuffer<float>(batch_ * actions_count_);
  metrics_ = DeviceBuffer<float>(kp::kPpoMetrics);
  metric_sums_ = DeviceBuffer<float>(kp::kPpoMetrics);
  update_metrics_ = DeviceBuffer<float>(kp::kPpoMetrics);
  loss_partials_ = DeviceBuffer<float>(kp::ppo_loss_blocks(batch_) * kp::kPpoMetrics);
  summary_ = DeviceBuffer<kp::EpisodeSummary>(1);
  probabilities_ = DeviceBuffer<float>(envs_ * actions_count_);

  const cudaStream_t s = stream();
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(counters_.data(), 0, counters_.bytes(), s));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(metric_sums_.data(), 0, metric_sums_.bytes(), s));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(update_metrics_.data(), 0, update_metrics_.bytes(), s));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(summary_.data(), 0, summary_.bytes(), s));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(eval_inputs_.data(), 0, eval_inputs_.bytes(), s));
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(eval_values_.data(), 0, eval_values_.bytes(), s));
  env_.reset(config_.seed, s);
  // The rollout stores every step output (after the reset: an env may move them there).
  const VectorEnvStep outputs = env_.step_outputs();
  if (outputs.rewards == nullptr || outputs.terminated == nullptr ||
      outputs.truncated == nullptr || outputs.final_observations == nullptr ||
      outputs.observations == nullptr)
    throw Error("PpoTrainer", "invalid env",
                "a step output of the env is null; the rollout stores every one (an env that "
                "never terminates gives an array of zeros)",
                __FILE__, __LINE__);
  context_.synchronize();
}

PpoTrainer::~PpoTrainer() = default;

PpoRolloutView PpoTrainer::rollout() const noexcept {
  const std::size_t first_final = (steps_ + 1) * envs_;
  return {eval_inputs_.data(),      eval_inputs_.data() + first_final * obs_size_,
          eval_values_.data(),      eval_values_.data() + first_final,
          actions_.data(),          log_prob_.data(),
          rewards_.data(),          terminated_.data(),
          truncated_.data(),        advantages_.data(),
          returns_.data()};
}

// ----- resident pieces

void PpoTrainer::begin_rollout() {
  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(eval_inputs_.data(), env_.observations(),
                                      envs_ * obs_size_ * sizeof(float), cudaMemcpyDeviceToDevice,
                                      stream()));
}

void PpoTrainer::rollout_step() {
  const NvtxRange range("ppo/rollout_step");
  const cudaStream_t s = stream();
  const kp::SampleStore store{actions_.data(), log_prob_.data(), counters_.data() + 1, steps_};
  if (const kernels::FusedMlp* policy = actor_->fused_view(envs_)) {
    kp::launch_policy_forward_sample(*policy, env_.observations(), envs_,
                                     actor_->config().hidden_activation, step_actions_.data(),
                                     store, sample_seed_, counters_.data(), s);
  } else {
    const float* logits = actor_->forward(context_, env_.observations(), envs_);
    kp::launch_sample_actions(step_actions_.data(), store, logits, envs_, actions_count_,
                              sample_seed_, counters_.data(), s);
  }
  env_.step(step_actions_.data(), s);
  float* observations = eval_inputs_.data();
  float* finals = observations + (steps_ + 1) * envs_ * obs_size_;
  kp::launch_store_transition(
      {rewards_.data(), terminated_.data(), truncated_.data(), finals, observations},
      store_inputs(env_.step_outputs()), envs_, obs_size_, steps_, counters_.data() + 1,
      counters_.data(), s);
}

void PpoTrainer::evaluate_values() {
  const std::size_t rows = (2 * steps_ + 1) * envs_;
  for (std::size_t first = 0; first < rows; first += critic_chunk_) {
    const std::size_t n = std::min(critic_chunk_, rows - first);
    const float* v = critic_->forward(context_, eval_inputs_.data() + first * obs_size_, n);
    RESIDENT_CUDA_CHECK(cudaMemcpyAsync(eval_values_.data() + first, v, n * sizeof(float),
                                        cudaMemcpyDeviceToDevice, stream()));
  }
}

void PpoTrainer::finish_rollout() {
  const NvtxRange range("ppo/finish_rollout");
  const cudaStream_t s = stream();
  evaluate_values();
  kp::launch_gae(advantages_.data(), returns_.data(), rewards_.data(), eval_values_.data(),
                 terminated_.data(), truncated_.data(),
                 eval_values_.data() + (steps_ + 1) * envs_, steps_, envs_,
                 static_cast<float>(config_.gamma), static_cast<float>(config_.gae_lambda), s);
  if (config_.normalize_advantages)
    kp::launch_normalize_advantages(advantages_.data(), normalize_partials_.data(),
                                    normalize_partials_.size(), samples_,
                                    static_cast<float>(config_.advantage_epsilon), s);
  env_.collect_episode_stats(s);
}

void PpoTrainer::begin_epoch() {
  const kp::PermutationScratch scratch{keys_in_.data(), keys_out_.data(), values_in_.data(),
                                       sort_temp_.data(), sort_temp_.size()};
  kp::launch_random_permutation(permutation_.data(), scratch, samples_, permutation_seed_,
                                counters_.data() + 2, config_.minibatches, stream());
}

void PpoTrainer::minibatch_update() {
  kp::launch_gather_minibatch(
      {mb_observations_.data(), mb_actions_.data(), mb_log_prob_.data(), mb_advantages_.data(),
       mb_returns_.data(), mb_values_.data()},
      {eval_inputs_.data(), actions_.data(), log_prob_.data(), advantages_.data(),
       returns_.data(), eval_values_.data()},
      permutation_.data(), batch_, obs_size_, config_.minibatches, counters_.data() + 2,
      stream());
  train_minibatch();
}

void PpoTrainer::train_minibatch() {
  const NvtxRange range("ppo/minibatch");
  const cudaStream_t s = stream();
  slab_.zero_grads(s);
  const float* logits = actor_->forward(context_, mb_observations_.data(), batch_);
  const float* values = critic_->forward(context_, mb_observations_.data(), batch_);
  const kp::PpoLossCoefficients coefficients{static_cast<float>(config_.clip_coef),
                                             config_.clip_value_loss,
                                             static_cast<float>(config_.entropy_coef),
                                             static_cast<float>(config_.value_coef)};
  kp::launch_categorical_ppo_loss(d_logits_.data(), d_value_.data(), metrics_.data(),
                                  metric_sums_.data(), loss_partials_.data(), counters_.data() + 2,
                                  {logits, mb_actions_.data(), values, mb_log_prob_.data(),
                                   mb_advantages_.data(), mb_returns_.data(), mb_values_.data()},
                                  batch_, actions_count_, coefficients, s);
  actor_->backward(context_, mb_observations_.data(), d_logits_.data(), nullptr, batch_);
  critic_->backward(context_, mb_observations_.data(), d_value_.data(), nullptr, batch_);
  slab_.clip_and_adamw_step(static_cast<float>(config_.max_grad_norm), adamw_, s);
}

void PpoTrainer::finish_update() {
  kp::launch_update_summary(update_metrics_.data(), summary_.data(), metric_sums_.data(),
                            kp::kPpoMetrics, config_.epochs * config_.minibatches,
                            env_.episode_return_sum(), env_.episode_count(), stream());
}

void PpoTrainer::enqueue_update() {
  begin_rollout();
  for (std::size_t t = 0; t < steps_; ++t) rollout_step();
  finish_rollout();
  for (std::size_t e = 0; e < config_.epochs; ++e) {
    begin_epoch();
    for (std::size_t m = 0; m < config_.minibatches; ++m) minibatch_update();
  }
  finish_update();
}

PpoUpdateResult PpoTrainer::read_update_result() {
  const cudaStream_t s = stream();
  policy_readback_.enqueue(update_metrics_.data() + kp::kPolicyLoss, s);
  value_readback_.enqueue(update_metrics_.data() + kp::kValueLoss, s);
  episode_readback_.enqueue(summary_.data(), s);
  PpoUpdateResult r;
  r.policy_loss = policy_readback_.wait();
  r.value_loss = value_readback_.wait();
  const kp::EpisodeSummary e = episode_readback_.wait();
  r.mean_episode_return = e.mean_return;
  r.episodes = e.episodes;
  return r;
}

PpoUpdateResult PpoTrainer::train_update() {
  if (config_.mode == PpoMode::HostStaged) {
    const PpoUpdateResult r = train_update_host_staged();
    ++updates_done_;
    return r;
  }
  const NvtxRange range("ppo/update");
  if (config_.use_graphs) {
    if (!update_graph_.captured()) update_graph_.capture(stream(), [&] { enqueue_update(); });
    update_graph_.launch(stream());
  } else {
    enqueue_update();
  }
  const PpoUpdateResult r = read_update_result();
  ++updates_done_;
  return r;
}

}  // namespace resident::ppo
