// PpoConfig: the hyperparameters of a PPO trainer (defaults: CleanRL's ppo.py on CartPole) and
// their validation. validate() throws resident::Error("PpoConfig", "invalid config", ...) naming
// the first bad field, its value and the allowed range.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lib/nn/param_slab.h"

namespace resident::ppo {

// Resident: everything on the device, three scalars back per update. HostStaged: the classic
// round-trip pipeline (per-step softmax download and CPU sampling, rollout downloaded into
// per-trajectory host arrays, GAE on the CPU, minibatches assembled on the host and uploaded,
// the losses read back per minibatch).
enum class PpoMode { Resident, HostStaged };

struct PpoConfig {
  std::size_t env_count = 4;          // N >= 1
  std::size_t rollout_steps = 128;    // T >= 1; N * T <= 2^31 - 1
  std::size_t epochs = 4;             // K >= 1
  std::size_t minibatches = 4;        // M >= 1, divides N * T
  std::vector<std::size_t> hidden = {64, 64};  // tanh layers of actor and critic, each >= 1
  double learning_rate = 2.5e-4;      // finite, > 0
  bool anneal_lr = true;              // linearly to 0 over total_updates (adamw_config())
  std::size_t total_updates = 1000;   // >= 1 (the annealing horizon)
  double gamma = 0.99;                // [0, 1]
  double gae_lambda = 0.95;           // [0, 1]
  double clip_coef = 0.2;             // (0, 1)
  bool clip_value_loss = true;
  double entropy_coef = 0.01;         // finite, >= 0
  double value_coef = 0.5;            // finite, >= 0
  double max_grad_norm = 0.5;         // > 0 (+inf: no clipping)
  double adam_beta1 = 0.9;            // [0, 1)
  double adam_beta2 = 0.999;          // [0, 1)
  double adam_eps = 1e-5;             // finite, > 0
  double weight_decay = 0.0;          // finite, >= 0
  bool normalize_advantages = true;   // over the whole rollout
  double advantage_epsilon = 1e-8;    // finite, > 0
  std::uint64_t seed = 1;
  PpoMode mode = PpoMode::Resident;
  bool use_graphs = true;             // resident mode: one CUDA graph per update
};

void validate(const PpoConfig& config);

// FNV-1a over every field that changes the trained result (use_graphs excluded): a checkpoint
// records it and refuses to load into a trainer of another configuration.
std::uint64_t config_hash(const PpoConfig& config);

// The AdamW configuration of a valid config. With anneal_lr, CleanRL's annealing on the slab's
// device schedule: update u (0-based) takes its K * M minibatch steps at
// learning_rate * (1 - u / total_updates), i.e. LinearToZero with steps_per_group = K * M and
// total_groups = total_updates; otherwise a constant learning_rate.
nn::AdamWConfig adamw_config(const PpoConfig& config);

// N * T and N * T / M of a valid config.
inline std::size_t rollout_samples(const PpoConfig& c) { return c.env_count * c.rollout_steps; }
inline std::size_t minibatch_size(const PpoConfig& c) { return rollout_samples(c) / c.minibatches; }

}  // namespace resident::ppo
