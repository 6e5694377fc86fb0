// PPO benchmarks (issue 8), CartPole, actor and critic 64x64 tanh, 4 epochs x 4 minibatches:
//   ppo_update/resident, ppo_update/host_staged: one update (rollout of T steps of N envs, then
//     the K x M minibatch update) on the same config (256 envs x 128 steps), so the two rows
//     compare directly; target resident >= 5x faster.
//   ppo_train/resident: training throughput at 4096 envs x 128 steps (524,288 env steps per
//     update), counter env_steps_per_s; target >= 30M env steps/s.
// Each iteration is one train_update(), readbacks included; the resident rows run under the
// contract of a resident update (3 scalar D2H: two losses and the episodic-return summary; no
// bulk D2H, no H2D; 3 waits).
#include <benchmark/benchmark.h>

#include <memory>

#include "bench/harness.h"
#include "lib/rl/ppo/cartpole_vector_env.h"
#include "lib/rl/ppo/ppo_trainer.h"

namespace {

using namespace resident;

audit::TransferContract resident_update_contract() {
  return {.phase = "ppo/update", .max_d2h_scalar = 3, .max_d2h_bulk = 0, .max_h2d = 0,
          .max_syncs = 3};
}

void BM_ppo_update(benchmark::State& state, ppo::PpoMode mode) {
  ppo::PpoConfig config;
  config.env_count = static_cast<std::size_t>(state.range(0));
  config.rollout_steps = static_cast<std::size_t>(state.range(1));
  config.total_updates = 100000;  // annealing stays near the base lr during the bench
  config.mode = mode;
  ppo::CartPoleVectorEnv env(config.env_count);
  ppo::PpoTrainer trainer(config, env);
  const bool resident = mode == ppo::PpoMode::Resident;
  bench::TimedPhase timed(state, resident ? "ppo/update" : "ppo/host_staged_update",
                          resident ? resident_update_contract() : audit::TransferContract{},
                          trainer.stream());
  const auto body = [&] { (void)trainer.train_update(); };
  timed.warm_up(body, 2);
  for (auto _ : state) timed.iteration(body);
  timed.finish();
  timed.set_rate("env_steps_per_s", static_cast<double>(config.env_count * config.rollout_steps));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  bench::add_context();
  bench::configure(benchmark::RegisterBenchmark("ppo_update/resident", BM_ppo_update,
                                                ppo::PpoMode::Resident))
      ->ArgNames({"envs", "steps"})->Args({256, 128});
  bench::configure(benchmark::RegisterBenchmark("ppo_update/host_staged", BM_ppo_update,
                                                ppo::PpoMode::HostStaged), 3)
      ->ArgNames({"envs", "steps"})->Args({256, 128});
  bench::configure(benchmark::RegisterBenchmark("ppo_train/resident", BM_ppo_update,
                                                ppo::PpoMode::Resident))
      ->ArgNames({"envs", "steps"})->Args({4096, 128});
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
