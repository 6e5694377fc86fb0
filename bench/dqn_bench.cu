// DQN trainer benchmarks: one epoch (steps_per_epoch vector env steps, each followed by
// one gradient step) of the resident pipeline (CUDA-graph replays, one 2-scalar readback per
// epoch) against the host-staged pipeline (CPU sum-tree replay, per-step downloads, uploads and
// syncs), same config, same env and gradient steps, in one run:
//   dqn_epoch/resident      contract: 0 bulk D2H, 0 H2D, <= 2 scalar D2H, <= 2 syncs per epoch
//   dqn_epoch/host_staged   no contract limits (its transfers are the point)
//   dqn_epoch/resident_unfused  the resident pipeline with the gradient step and acting on the
//                           GEMM path (DqnConfig::fused_train_step and fused_acting off; the rows
//                           above use both fused kernels)
//   dqn_epoch/resident_gemm_acting  the fused gradient step, acting on the GEMM path (what the
//                           fused acting kernel saves)
//   dqn_epoch/resident_serial_update  every priority update, train-metrics and episode-tracker
//                           launch in line (DqnConfig::overlap_side_work off; the other
//                           resident rows run a step's last update beside the next step's
//                           collection and the tracker beside the insert and training)
//   dqn_epoch/resident_no_programmatic_launch  every kernel launched in plain stream order (the
//                           other resident rows let the env step, transition assembly, draw and
//                           fused gradient step start while the kernel before them finishes:
//                           kernels/core/programmatic_launch.cuh)
//   dqn_epoch/resident_step_graphs  one steady-state step per CUDA-graph launch (the other
//                           resident rows replay DqnConfig::steps_per_graph = 4 steps per launch)
// Config: bench/dqn_bench_config.h (trading env, 64-dim observations, 32 envs, MLP 64-256-256-3,
// replay capacity 1e6, batch 256), shared with dev/dqn_step_timeline.
// Targets (H200): resident >= 5x host-staged; >= 20k gradient steps/s resident.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "bench/dqn_bench_config.h"
#include "bench/harness.h"
#include "kernels/core/programmatic_launch.h"
#include "lib/rl/dqn/dqn_trainer.h"

namespace {

using namespace resident;
using namespace resident::dqn;

constexpr std::size_t kStepsPerEpoch = bench::kDqnStepsPerEpoch;
using Fused = bench::DqnBenchVariant;

void BM_dqn_epoch(benchmark::State& state, DqnPipeline pipeline, Fused fused) {
  const ProgrammaticLaunchScope programmatic(fused.programmatic_launch);
  const DqnConfig config = bench::dqn_bench_config(pipeline, fused);
  DqnTrainer trainer(config);
  state.SetLabel(std::string("gradient step: ") +
                 (trainer.fused_train_step() ? "fused" : "GEMM path") +
                 ", acting: " + (trainer.fused_acting() ? "fused" : "GEMM path") +
                 (config.overlap_side_work ? "" : ", no side stream") +
                 (fused.programmatic_launch ? "" : ", stream-ordered launches") +
                 (pipeline == DqnPipeline::Resident
                      ? ", " + std::to_string(config.steps_per_graph) + " steps per graph"
                      : std::string()));
  audit::TransferContract contract;  // host-staged: no limits
  if (pipeline == DqnPipeline::Resident) {
    contract.max_d2h_scalar = DqnEpochContract::max_d2h_scalar;
    contract.max_d2h_bulk = DqnEpochContract::max_d2h_bulk;
    contract.max_h2d = DqnEpochContract::max_h2d;
    contract.max_syncs = DqnEpochContract::max_syncs;
  }
  const auto body = [&] { (void)trainer.train_epoch(); };
  bench::TimedPhase timed(state,
                          pipeline == DqnPipeline::Resident ? "dqn/epoch" : "dqn_host_staged/epoch",
                          contract, trainer.context().stream());
  // Warm-up: the replay fills past learning_starts and the step graph is captured.
  const std::size_t warm_epochs =
      trainer.warmup_vector_steps() / kStepsPerEpoch + 2;
  timed.warm_up(body, static_cast<int>(warm_epochs));
  for (auto _ : state) timed.iteration(body);
  timed.finish();
  timed.set_rate("env_steps_per_s", static_cast<double>(kStepsPerEpoch * config.env_count));
  timed.set_rate("gradient_steps_per_s",
                 static_cast<double>(kStepsPerEpoch * config.gradient_steps_per_env_step));
  state.counters["steps_per_epoch"] = static_cast<double>(kStepsPerEpoch);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  bench::add_context();
  bench::configure(benchmark::RegisterBenchmark("dqn_epoch/resident", BM_dqn_epoch,
                                                DqnPipeline::Resident, Fused{}))
      ->Iterations(10);
  bench::configure(benchmark::RegisterBenchmark("dqn_epoch/resident_unfused", BM_dqn_epoch,
                                                DqnPipeline::Resident, Fused{false, false}))
      ->Iterations(10);
  bench::configure(benchmark::RegisterBenchmark("dqn_epoch/resident_gemm_acting", BM_dqn_epoch,
                                                DqnPipeline::Resident, Fused{true, false}))
      ->Iterations(10);
  bench::configure(benchmark::RegisterBenchmark("dqn_epoch/resident_serial_update", BM_dqn_epoch,
                                                DqnPipeline::Resident, Fused{true, true, false}))
      ->Iterations(10);
  bench::configure(benchmark::RegisterBenchmark("dqn_epoch/resident_no_programmatic_launch",
                                                BM_dqn_epoch, DqnPipeline::Resident,
                                                Fused{true, true, true, false}))
      ->Iterations(10);
  bench::configure(benchmark::RegisterBenchmark("dqn_epoch/resident_step_graphs", BM_dqn_epoch,
                                                DqnPipeline::Resident,
                                                Fused{true, true, true, true, 1}))
      ->Iterations(10);
  bench::configure(benchmark::RegisterBenchmark("dqn_epoch/host_staged", BM_dqn_epoch,
                                                DqnPipeline::HostStaged, Fused{}))
      ->Iterations(5);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
