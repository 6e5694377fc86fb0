// The host-staged PPO update: the classic pipeline that resident mode replaces, as a framework
// on a CPU-driven loop runs it (Stable-Baselines3's rollout buffer, CleanRL's torch loop):
//   per step: policy and value forward on the device, softmax probabilities and values
//     downloaded, actions sampled on the CPU, actions uploaded, env step, rewards/dones and the
//     truncation bootstrap values downloaded;
//   after the rollout: per-trajectory host arrays, GAE and advantage normalization on the CPU,
//     a CPU shuffle, minibatches assembled on the host and uploaded, the same device train step,
//     the policy and value losses read back after every minibatch.
// Host memory is pageable (as torch's .cpu()), copies are ordered on the trainer's stream.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/rl/ppo/sample_actions.h"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "lib/rl/ppo/ppo_trainer.h"

namespace resident::ppo {

namespace {

template <class T>
void download(T* host, const T* device, std::size_t count, cudaStream_t stream) {
  RESIDENT_CUDA_CHECK(
      cudaMemcpyAsync(host, device, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
}

template <class T>
void upload(T* device, const T* host, std::size_t count, cudaStream_t stream) {
  RESIDENT_CUDA_CHECK(
      cudaMemcpyAsync(device, host, count * sizeof(T), cudaMemcpyHostToDevice, stream));
}

struct Trajectory {
  std::vector<float> observations;  // [L, D]
  std::vector<std::int32_t> actions;
  std::vector<float> log_prob, values, rewards;
  double bootstrap = 0.0;  // V after the last step: 0 on termination
};

}  // namespace

// One rollout as downloaded, step-major.
struct HostRollout {
  std::vector<float> observations;  // [T, N, D]
  std::vector<std::int32_t> actions;
  std::vector<float> log_prob, values, rewards, final_values;  // [T, N]
  std::vector<std::uint8_t> terminated, truncated;             // [T, N]
  std::vector<float> last_values;                              // [N]
};

void PpoTrainer::host_rollout(HostRollout& r) {
  const cudaStream_t s = stream();
  const std::size_t N = envs_, D = obs_size_, A = actions_count_;
  r.observations.resize(steps_ * N * D);
  r.actions.resize(steps_ * N);
  for (auto* v : {&r.log_prob, &r.values, &r.rewards, &r.final_values}) v->resize(steps_ * N);
  r.terminated.resize(steps_ * N);
  r.truncated.resize(steps_ * N);
  r.last_values.resize(N);
  std::vector<float> probabilities(N * A);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (std::size_t t = 0; t < steps_; ++t) {
    const std::size_t row = t * N;
    const float* logits = actor_->forward(context_, env_.observations(), N);
    kernels::ppo::launch_policy_probabilities(probabilities_.data(), logits, N, A, s);
    const float* values = critic_->forward(context_, env_.observations(), N);
    download(probabilities.data(), probabilities_.data(), N * A, s);
    download(r.values.data() + row, values, N, s);
    download(r.observations.data() + row * D, env_.observations(), N * D, s);
    context_.synchronize();
    for (std::size_t n = 0; n < N; ++n) {  // CPU sampling, inverse CDF
      const float* p = probabilities.data() + n * A;
      const double u = uniform(host_rng_);
      double cumulative = 0.0;
      std::size_t a = A - 1;
      for (std::size_t c = 0; c < A; ++c) {
        cumulative += p[c];
        if (u < cumulative) {
          a = c;
          break;
        }
      }
      r.actions[row + n] = static_cast<std::int32_t>(a);
      r.log_prob[row + n] = std::log(std::max(p[a], 1e-30f));
    }
    upload(step_actions_.data(), r.actions.data() + row, N, s);
    env_.step(step_actions_.data(), s);
    const VectorEnvStep out = env_.step_outputs();
    const float* final_values = critic_->forward(context_, out.final_observations, N);
    download(r.final_values.data() + row, final_values, N, s);
    download(r.rewards.data() + row, out.rewards, N, s);
    download(r.terminated.data() + row, out.terminated, N, s);
    download(r.truncated.data() + row, out.truncated, N, s);
    context_.synchronize();
  }
  download(r.last_values.data(), critic_->forward(context_, env_.observations(), N), N, s);
  env_.collect_episode_stats(s);
  context_.synchronize();
}

PpoUpdateResult PpoTrainer::train_update_host_staged() {
  const NvtxRange range("ppo/host_staged_update");
  const cudaStream_t s = stream();
  const std::size_t N = envs_, D = obs_size_;
  HostRollout r;
  host_rollout(r);

  // Per-trajectory arrays: each env's steps split where an episode ends.
  std::vector<Trajectory> trajectories;
  for (std::size_t n = 0; n < N; ++n) {
    Trajectory current;
    for (std::size_t t = 0; t < steps_; ++t) {
      const std::size_t i = t * N + n;
      current.observations.insert(current.observations.end(), r.observations.begin() + static_cast<std::ptrdiff_t>(i * D),
                                  r.observations.begin() + static_cast<std::ptrdiff_t>((i + 1) * D));
      current.actions.push_back(r.actions[i]);
      current.log_prob.push_back(r.log_prob[i]);
      current.values.push_back(r.values[i]);
      current.rewards.push_back(r.rewards[i]);
      const bool ends = r.terminated[i] != 0 || r.truncated[i] != 0;
      if (ends || t + 1 == steps_) {
        current.bootstrap = r.terminated[i] != 0  ? 0.0
                            : r.truncated[i] != 0 ? static_cast<double>(r.final_values[i])
                                                  : static_cast<double>(r.last_values[n]);
        trajectories.push_back(std::move(current));
        current = Trajectory{};
      }
    }
  }

  // GAE per trajectory (double), flattened into the sample arrays.
  std::vector<float> observations, log_prob, advantages, returns, values;
  std::vector<std::int32_t> actions;
  observations.reserve(samples_ * D);
  const double gamma = config_.gamma, gl = config_.gamma * config_.gae_lambda;
  for (const Trajectory& tr : trajectories) {
    const std::size_t length = tr.rewards.size();
    std::vector<double> adv(length);
    double next_value = tr.bootstrap, next_adv = 0.0;
    for (std::size_t k = length; k-- > 0;) {
      const double delta = tr.rewards[k] + gamma * next_value - tr.values[k];
      adv[k] = delta + (k + 1 == length ? 0.0 : gl * next_adv);
      next_adv = adv[k];
      next_value = tr.values[k];
    }
    observations.insert(observations.end(), tr.observations.begin(), tr.observations.end());
    actions.insert(actions.end(), tr.actions.begin(), tr.actions.end());
    log_prob.insert(log_prob.end(), tr.log_prob.begin(), tr.log_prob.end());
    values.insert(values.end(), tr.values.begin(), tr.values.end());
    for (std::size_t k = 0; k < length; ++k) {
      advantages.push_back(static_cast<float>(adv[k]));
      returns.push_back(static_cast<float>(adv[k] + tr.values[k]));
    }
  }
  if (config_.normalize_advantages) {
    double sum = 0.0, squares = 0.0;
    for (float a : advantages) sum += a;
    const double mean = sum / static_cast<double>(samples_);
    for (float a : advantages) squares += (a - mean) * (a - mean);
    const double scale = 1.0 / (std::sqrt(squares / static_cast<double>(samples_)) + config_.advantage_epsilon);
    for (float& a : advantages) a = static_cast<float>((a - mean) * scale);
  }

  // K epochs of M minibatches, assembled on the host and uploaded; losses read per minibatch.
  std::vector<std::uint32_t> order(samples_);
  std::vector<float> b_obs(batch_ * D), b_lp(batch_), b_adv(batch_), b_ret(batch_), b_val(batch_);
  std::vector<std::int32_t> b_act(batch_);
  for (std::size_t e = 0; e < config_.epochs; ++e) {
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), host_rng_);
    for (std::size_t m = 0; m < config_.minibatches; ++m) {
      for (std::size_t i = 0; i < batch_; ++i) {
        const std::size_t j = order[m * batch_ + i];
        std::copy_n(observations.begin() + static_cast<std::ptrdiff_t>(j * D), D,
                    b_obs.begin() + static_cast<std::ptrdiff_t>(i * D));
        b_act[i] = actions[j];
        b_lp[i] = log_prob[j];
        b_adv[i] = advantages[j];
        b_ret[i] = returns[j];
        b_val[i] = values[j];
      }
      upload(mb_observations_.data(), b_obs.data(), b_obs.size(), s);
      upload(mb_actions_.data(), b_act.data(), batch_, s);
      upload(mb_log_prob_.data(), b_lp.data(), batch_, s);
      upload(mb_advantages_.data(), b_adv.data(), batch_, s);
      upload(mb_returns_.data(), b_ret.data(), batch_, s);
      upload(mb_values_.data(), b_val.data(), batch_, s);
      train_minibatch();
      policy_readback_.enqueue(metrics_.data() + kernels::ppo::kPolicyLoss, s);
      value_readback_.enqueue(metrics_.data() + kernels::ppo::kValueLoss, s);
      (void)policy_readback_.wait();
      (void)value_readback_.wait();
    }
  }
  finish_update();
  return read_update_result();
}

}  // namespace resident::ppo
