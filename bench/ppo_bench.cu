// PPO benchmarks, CartPole, actor and critic 64x64 tanh, 4 epochs x 4 minibatches:
//   ppo_update/resident, ppo_update/host_staged: one update (rollout of T steps of N envs, then
//     the K x M minibatch update) on the same config (256 envs x 128 steps), so the two rows
//     compare directly; target resident >= 5x faster.
//   ppo_train/resident: training throughput at 4096 envs x 128 steps (524,288 env steps per
//     update), counter env_steps_per_s; target >= 30M env steps/s.
//   ppo_agents/resident: 64 independent agents (seeds 1..64, CleanRL's CartPole config: 4 envs x
//     128 steps) trained at once in one process, each with its own trainer, env and stream,
//     interleaved one update each in turn, up to 1M env steps each (an agent stops when it
//     reaches 475); counters agents_reached_475, median/max env steps to 475 (over the agents
//     that reached it), env_steps_per_s (all agents, timed part).
// Each iteration of the first three rows is one train_update(), readbacks included; they run
// under the contract of a resident update (3 scalar D2H: two losses and the episodic-return
// summary; no bulk D2H, no H2D; 3 waits).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <limits>
#include <memory>
#include <vector>

#include "bench/harness.h"
#include "lib/core/captured_graph.h"
#include "lib/core/scalar_readback.h"
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

// ----- ppo_agents: many independent agents in one process.
//
// PpoTrainer::train_update() waits for its own readbacks, so calling it for each agent in turn
// would run the agents one after another. Each agent here instead owns a CUDA graph of its
// trainer's enqueue_update() (the same work train_update() captures and launches) and two
// ScalarReadbacks of its env's per-update episode statistics (return sum, 8 bytes; episode count,
// 8 bytes): a round launches every active agent's update on its own stream and enqueues its
// readbacks, then waits for them all, so the agents' GPU work overlaps. The last-100 rule is
// tests/rl/ppo/ppo_trainer_test.cu PpoLearning's: each episode that ended during an update
// enters the window with the update's mean episode return (as a float); an agent has reached 475
// when the window holds 100 episodes whose mean is >= 475; then it stops training.

constexpr std::size_t kAgentBudget = 1000000;  // env steps per agent, as in PpoLearning
constexpr double kTargetReturn = 475.0;

struct Agent {
  explicit Agent(std::uint64_t seed) {
    config.seed = seed;
    config.total_updates = kAgentBudget / (config.env_count * config.rollout_steps);
    env = std::make_unique<ppo::CartPoleVectorEnv>(config.env_count);
    trainer = std::make_unique<ppo::PpoTrainer>(config, *env);
    graph.capture(trainer->stream(), [&] { trainer->enqueue_update(); });
  }
  void launch() {
    graph.launch(trainer->stream());
    return_sum.enqueue(env->episode_return_sum(), trainer->stream());
    episodes.enqueue(env->episode_count(), trainer->stream());
    ++updates;
    env_steps += config.env_count * config.rollout_steps;
  }
  void collect() {
    const double sum = return_sum.wait();
    const unsigned long long count = episodes.wait();
    if (count > 0) {
      const double mean = static_cast<double>(static_cast<float>(sum / static_cast<double>(count)));
      for (unsigned long long e = 0; e < count; ++e) {
        last_returns.push_back(mean);
        if (last_returns.size() > 100) last_returns.pop_front();
      }
    }
    if (last_returns.size() == 100) {
      double total = 0.0;
      for (const double v : last_returns) total += v;
      running = total / 100.0;
    }
    if (running >= kTargetReturn) reached_at = env_steps;
  }
  bool active() const { return reached_at == 0 && updates < config.total_updates; }

  ppo::PpoConfig config;  // CleanRL's CartPole defaults
  std::unique_ptr<ppo::CartPoleVectorEnv> env;
  std::unique_ptr<ppo::PpoTrainer> trainer;
  CapturedGraph graph;
  ScalarReadback<double> return_sum;
  ScalarReadback<unsigned long long> episodes;
  std::deque<double> last_returns;
  double running = 0.0;
  std::size_t updates = 0, env_steps = 0, reached_at = 0;  // reached_at 0: not reached
};

void BM_ppo_agents(benchmark::State& state) {
  const auto count = static_cast<std::size_t>(state.range(0));
  std::vector<std::unique_ptr<Agent>> agents;
  for (std::size_t i = 0; i < count; ++i) agents.push_back(std::make_unique<Agent>(i + 1));
  const std::size_t max_updates = agents.front()->config.total_updates;
  // Every update of every agent: two 8-byte readbacks and their two waits; nothing else.
  const audit::TransferContract contract{.phase = "ppo/agents",
                                         .max_d2h_scalar = 2 * count * max_updates,
                                         .max_d2h_bulk = 0,
                                         .max_h2d = 0,
                                         .max_syncs = 2 * count * max_updates};
  // One round: one update of every active agent, all launched before any is waited for.
  std::vector<Agent*> launched;
  launched.reserve(count);
  std::size_t rounds = 0, steps_in_rounds = 0;
  const auto round = [&] {
    launched.clear();
    for (auto& a : agents)
      if (a->active()) launched.push_back(a.get());
    if (launched.empty()) return;
    for (Agent* a : launched) a->launch();
    for (Agent* a : launched) a->collect();
    steps_in_rounds += launched.size() * launched.front()->config.env_count *
                       launched.front()->config.rollout_steps;
    if (++rounds % 100 == 0) {
      std::size_t reached = 0;
      for (const auto& a : agents) reached += a->reached_at != 0 ? 1 : 0;
      std::fprintf(stderr, "ppo_agents: round %zu, %zu agents training, %zu reached 475\n",
                   rounds, launched.size(), reached);
    }
  };
  const auto any_active = [&] {
    return std::any_of(agents.begin(), agents.end(), [](const auto& a) { return a->active(); });
  };
  // The timing stream is idle at the start of the iteration and the body returns only after its
  // last readback landed, so the events measure the whole run.
  bench::TimedPhase timed(state, "ppo/agents", contract, agents.front()->trainer->stream());
  timed.warm_up(round, 1);  // the first update of every agent (first graph launches)
  const std::size_t warm_up_steps = steps_in_rounds;
  for (auto _ : state)
    timed.iteration([&] {
      while (any_active()) round();
    });
  timed.finish();
  timed.set_rate("env_steps_per_s", static_cast<double>(steps_in_rounds - warm_up_steps));

  std::vector<double> to_target;
  for (const auto& a : agents)
    if (a->reached_at != 0) to_target.push_back(static_cast<double>(a->reached_at));
  std::sort(to_target.begin(), to_target.end());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::size_t k = to_target.size();
  state.counters["agents"] = static_cast<double>(count);
  state.counters["agents_reached_475"] = static_cast<double>(k);
  state.counters["median_env_steps_to_475"] =
      k == 0 ? nan : (k % 2 == 1 ? to_target[k / 2] : 0.5 * (to_target[k / 2 - 1] + to_target[k / 2]));
  state.counters["max_env_steps_to_475"] = k == 0 ? nan : to_target.back();
  state.counters["env_steps_total"] = static_cast<double>(steps_in_rounds);
  state.counters["rounds"] = static_cast<double>(rounds);
  std::fprintf(stderr, "ppo_agents: %zu of %zu agents reached a last-100 mean of %.0f within %zu "
               "env steps each; env steps to reach it:", k, count, kTargetReturn, kAgentBudget);
  for (const double v : to_target) std::fprintf(stderr, " %.0f", v);
  std::fprintf(stderr, "\n");
}

}  // namespace

int main(int argc, char** argv) {
  // ppo_agents runs 64 streams at once; the default of 8 hardware work queues would serialize
  // them into 8 (false dependencies). Set before the first CUDA call; an explicit setting in the
  // environment wins. The single-stream rows use one queue either way.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", /*overwrite=*/0);
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
  bench::configure(benchmark::RegisterBenchmark("ppo_agents/resident", BM_ppo_agents), 1)
      ->ArgNames({"agents"})->Arg(64)->Iterations(1);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
