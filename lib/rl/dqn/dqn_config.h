// DqnConfig: everything a DqnTrainer is built from, its validation and its hash (checkpoints
// refuse a file written under another config).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/rl/dqn/epsilon_greedy.h"
#include "lib/env/market_series.h"
#include "lib/nn/param_slab.h"

namespace resident::dqn {

enum class DqnEnvKind { CartPole, Trading };

// Resident: collection, replay, training and priority updates on the GPU, graph-replayed steps,
// one readback per epoch. HostStaged: the classic round trip (transitions downloaded into the
// CPU sum-tree replay, batches assembled on the host and uploaded, TD errors downloaded for the
// CPU priority update, the loss read every step): the "before" of the benchmark.
enum class DqnPipeline { Resident, HostStaged };

// DqnConfig::steps_per_graph: its default and its largest value.
inline constexpr std::size_t kDefaultStepsPerGraph = 4;
inline constexpr std::size_t kMaxStepsPerGraph = 64;

struct DqnTradingConfig {
  SyntheticMarketConfig market{};    // the synthetic series (validated by its own validate())
  std::size_t window = 9;            // W >= 1; observation size W * F + 1
  std::size_t episode_length = 200;  // L >= 1, with market.steps >= W + L
  float cost_per_unit = 0.0f;        // finite, >= 0
  FeatureNormalizationOptions normalization{};
};

struct DqnConfig {
  DqnEnvKind env = DqnEnvKind::CartPole;
  DqnTradingConfig trading{};
  std::size_t env_count = 16;                   // vector envs N, [1, 65536]
  std::vector<std::size_t> hidden = {128, 128};  // hidden widths, each in [1, 65536]
  bool dueling = false;                         // V + A - mean(A) head
  double gamma = 0.99;                          // [0, 1]
  float reward_scale = 1.0f;                    // finite, > 0: y = scale * r + gamma * Q
  std::size_t batch = 128;                      // [1, 65536]
  std::size_t gradient_steps_per_env_step = 1;  // train steps per vector env step, [1, 64]
  std::size_t replay_capacity = 100000;         // [batch, 2^30]
  double priority_alpha = 0.6;                  // ReplayConfig's alpha
  double beta_start = 0.4;                      // ReplayConfig's beta_start
  double beta_max = 1.0;                        // ReplayConfig's beta_max
  std::uint64_t beta_annealing_steps = 100000;  // ReplayConfig's (sample calls)
  double priority_epsilon = 1e-6;               // ReplayConfig's epsilon
  std::size_t learning_starts = 1000;  // transitions collected before training, [batch, capacity]
  kernels::dqn::EpsilonSchedule epsilon{1.0, 0.05, 20000};  // start, end in [0, 1]
  nn::AdamWConfig adamw{5e-4, 0.9, 0.999, 1e-8, 0.0};
  double max_grad_norm = 10.0;           // > 0 (+inf: no clipping)
  double huber_delta = 1.0;              // finite, > 0
  double tau = 1.0;                      // (0, 1]: 1 = hard copy
  std::uint64_t target_update_period = 500;  // gradient steps between target updates, >= 1
  std::size_t steps_per_epoch = 1000;        // vector env steps per epoch, >= 1
  std::size_t return_window = 100;           // episodes in the recent-return mean, [1, 2^20]
  bool use_graph = true;     // resident steps as CUDA-graph replays (false: eager launches)
  // Resident steady-state steps per CUDA-graph launch with use_graph, [1, kMaxStepsPerGraph]
  // (an epoch's remaining steps, fewer than this, are one-step launches). The same kernels in
  // the same order, so results are bit-identical for any value (not in the config hash); more
  // steps per launch pay the host's launch and the GPU's wait between two graphs less often.
  std::size_t steps_per_graph = kDefaultStepsPerGraph;
  // The gradient step as one cooperative kernel (kernels/rl/dqn/dqn_train_step_fused.h) where
  // it applies: no dueling head, no TF32, at most 32 actions, 1 to 3 hidden layers, batch <=
  // nn::kFusedStepMaxBatch, a device that launches cooperative kernels. Both pipelines use it
  // (the host-staged one on its uploaded batch), so their difference stays the transfers.
  bool fused_train_step = true;
  // Acting (the online forward over the N observations and the epsilon-greedy choice) as one
  // cooperative kernel (kernels/rl/dqn/dqn_act_fused.h) where the network qualifies as above
  // (any N); else the network's forward and the epsilon-greedy launch. Evaluation acts the same.
  bool fused_acting = true;
  // Resident pipeline, work on two more streams: a train step's last priority update (followed
  // by the next insert's tree work) and its train metrics beside the next step's collection
  // (policy, env step, assembly: none touches the replay or the train counters), joined before
  // that step's insert or draw; and each step's episode tracker beside its insert, draw and
  // gradient step (none touches the tracker's state), joined at the step's end. Every buffer
  // sees the same operations in the same order, so results are bit-identical either way (not
  // in the config hash).
  bool overlap_side_work = true;
  bool allow_tf32 = false;
  DqnPipeline pipeline = DqnPipeline::Resident;
  std::uint64_t seed = 0;
};

// Throws resident::Error("DqnConfig", "invalid config", ...) listing every invalid field as
// "<field> = <value>, allowed <range>".
void validate(const DqnConfig& config);

// 64-bit hash of every field that changes what training computes (use_graph, steps_per_graph
// and overlap_side_work, which do not, are left out). Checkpoints carry it.
std::uint64_t config_hash(const DqnConfig& config);

// The CartPole-v1 learning config the tests hold to (3 of 3 seeds reach a last-100 mean return
// of 475 within 500k env steps on an H200): 16 envs, 256-256 network, batch 128, 4 gradient steps
// per vector step, 500k replay, lr 2.5e-4, Polyak 0.005 every step, epsilon 1 -> 0.01 over 30k
// env steps, 250 vector steps per epoch. Seed 0; set it.
DqnConfig cartpole_learning_config();

// The trading learning config the tests hold to (on `market`, the policy's held-out returns beat
// the market's on an H200): 32 envs, window 9, episodes of 100 steps, cost 0.0002 per unit,
// 128-128 network, batch 128, 2 gradient steps per vector step, 200k replay (learning starts
// at 5k), gamma 0.5, reward scale 100, lr 2.5e-4, Polyak 0.01 every step, epsilon 1 -> 0.05
// over 50k env steps, 500 vector steps per epoch, seed 5.
DqnConfig trading_learning_config(const SyntheticMarketConfig& market);

}  // namespace resident::dqn
