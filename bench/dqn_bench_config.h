// The DQN config of bench/dqn_bench.cu's rows (dqn_epoch/resident and its variants), shared with
// dev/dqn_step_timeline.cu so the timeline tool measures exactly what the bench times.
// Default: trading env on a synthetic market, window 9 x 7 features + position = 64-dim
// observations, 32 envs, MLP 64-256-256-3, replay capacity 1e6, batch 256, 200 vector steps per
// epoch, one gradient step per vector step.
#pragma once

#include <cstddef>

#include "lib/rl/dqn/dqn_config.h"

namespace resident::bench {

inline constexpr std::size_t kDqnStepsPerEpoch = 200;

// Which of the trainer's fused kernels a row uses, whether the last priority update of a step
// runs beside the next step's collection, whether kernels launch programmatically (the
// caller sets that with a resident::ProgrammaticLaunchScope: it is process-wide), and how many
// steady-state steps one CUDA-graph launch replays.
struct DqnBenchVariant {
  bool train_step = true;
  bool acting = true;
  bool side_work = true;
  bool programmatic_launch = true;
  std::size_t steps_per_graph = dqn::kDefaultStepsPerGraph;
};

inline dqn::DqnConfig dqn_bench_config(dqn::DqnPipeline pipeline, DqnBenchVariant variant) {
  dqn::DqnConfig c;
  c.env = dqn::DqnEnvKind::Trading;
  c.trading.market.steps = 100000;
  c.trading.market.noise_feature_count = 5;
  c.trading.window = 9;
  c.trading.episode_length = 200;
  c.env_count = 32;
  c.hidden = {256, 256};
  c.batch = 256;
  c.gradient_steps_per_env_step = 1;
  c.replay_capacity = 1000000;
  c.learning_starts = 10000;
  c.epsilon = {1.0, 0.05, 100000};
  c.tau = 0.005;
  c.target_update_period = 1;
  c.steps_per_epoch = kDqnStepsPerEpoch;
  c.pipeline = pipeline;
  c.fused_train_step = variant.train_step;
  c.fused_acting = variant.acting;
  c.overlap_side_work = variant.side_work;
  c.steps_per_graph = variant.steps_per_graph;
  c.seed = 1;
  return c;
}

}  // namespace resident::bench
