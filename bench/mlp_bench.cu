// MLP train step benchmarks: zero grads, forward, MSE, backward, global-norm clip and
// fused AdamW, eager and graph-replayed, at 256 x (64-256-256-3) and 4096 x (4-64-64-2), with the
// achieved FLOP/s of the three GEMMs per layer next to the SGEMM ceiling measured in the same run
// (gemm_ceiling/sgemm: a 4096^3 fp32 GEMM). Target (H200): graph-replayed 256 x (64-256-256-3)
// step <= 40 us. Every row uses RegressionStep's defaults (one-launch fused MSE, grads
// overwritten instead of memset + accumulate), which at batch 256 make the whole step one
// cooperative kernel (kernels/nn/mlp_train_step_fused.h; at 4096 the GEMM path: see
// kFusedStepMaxBatch); mlp_step/resident_unfused is the GEMM path at 256 for comparison, and the
// resident_lt rows differ only by the Mlp's opt-in cuBLASLt backend (bias/activation/bias-gradient
// epilogues, no split-K). Each row's label says which step ran. Every row times one step per
// iteration between two CUDA events, so the host's launch latency is inside the window; the
// mlp_step/resident_back_to_back row enqueues 16 graph replays per iteration (steps_per_s: the
// throughput of a training loop whose launches run ahead of the GPU).
#include <benchmark/benchmark.h>
#include <curand.h>

#include <memory>
#include <vector>

#include "bench/harness.h"
#include "lib/core/library_checks.h"
#include "lib/nn/mlp.h"
#include "lib/nn/regression_step.h"

namespace {

using namespace resident;

void fill_uniform(float* data, std::size_t n, unsigned long long seed) {
  curandGenerator_t gen = nullptr;
  RESIDENT_CURAND_CHECK(curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10));
  RESIDENT_CURAND_CHECK(curandSetPseudoRandomGeneratorSeed(gen, seed));
  RESIDENT_CURAND_CHECK(curandGenerateUniform(gen, data, n));
  RESIDENT_CURAND_CHECK(curandDestroyGenerator(gen));
}

void BM_mlp_step(benchmark::State& state, std::vector<std::size_t> widths, bool graphed,
                 bool lt, bool fused_step, int steps_per_iteration) {
  const auto batch = static_cast<std::size_t>(state.range(0));
  StreamContext context;
  nn::ParamSlab slab;
  nn::Mlp mlp({.widths = widths, .backend = lt ? nn::GemmBackend::CublasLt : nn::GemmBackend::Cublas},
              batch, slab);
  slab.finalize();
  ScratchPlan plan;
  mlp.plan(plan);
  ScratchArena arena(plan.bytes());
  mlp.bind(arena);
  mlp.init_parameters(1, context.stream());
  DeviceBuffer<float> x(batch * widths.front()), target(batch * widths.back());
  fill_uniform(x.data(), x.size(), 2);
  fill_uniform(target.data(), target.size(), 3);
  nn::RegressionStepConfig step_config;  // fused MSE, grads overwritten (no memset)
  step_config.fused_step = fused_step;
  nn::RegressionStep step(mlp, slab, step_config, x.data(), target.data(), batch);
  state.SetLabel(step.fused() ? "fused step (one kernel)" : "GEMM path");
  if (graphed) step.capture(context);
  context.synchronize();
  const auto body = [&] {
    for (int i = 0; i < steps_per_iteration; ++i) {
      if (graphed)
        step.replay(context);
      else
        step.run(context);
    }
  };
  bench::TimedPhase timed(state, "mlp/train_step", bench::zero_transfer_contract(), context.stream());
  timed.warm_up(body, 20);
  for (auto _ : state) timed.iteration(body);
  timed.finish();
  timed.set_rate("flops_per_s", mlp.train_flops(batch) * steps_per_iteration);
  timed.set_rate("samples_per_s", static_cast<double>(batch) * steps_per_iteration);
  timed.set_rate("steps_per_s", static_cast<double>(steps_per_iteration));
  state.counters["steps_per_iteration"] = steps_per_iteration;
}

void BM_sgemm_ceiling(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  StreamContext context;
  DeviceBuffer<float> a(n * n), b(n * n), c(n * n);
  fill_uniform(a.data(), a.size(), 4);
  fill_uniform(b.data(), b.size(), 5);
  const float one = 1.0f, zero = 0.0f;
  const int m = static_cast<int>(n);
  const auto body = [&] {
    RESIDENT_CUBLAS_CHECK(cublasSgemm(context.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one,
                                      a.data(), m, b.data(), m, &zero, c.data(), m));
  };
  bench::TimedPhase timed(state, "gemm/sgemm", bench::zero_transfer_contract(), context.stream());
  timed.warm_up(body, 3);
  for (auto _ : state) timed.iteration(body);
  timed.finish();
  timed.set_rate("flops_per_s", 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  bench::add_context();
  const std::vector<std::size_t> wide = {64, 256, 256, 3}, narrow = {4, 64, 64, 2};
  bench::configure(benchmark::RegisterBenchmark("mlp_step/resident", BM_mlp_step, wide, true, false, true, 1))
      ->ArgNames({"batch"})->Arg(256);
  bench::configure(benchmark::RegisterBenchmark("mlp_step/resident_eager", BM_mlp_step, wide, false, false, true, 1))
      ->ArgNames({"batch"})->Arg(256);
  bench::configure(benchmark::RegisterBenchmark("mlp_step/resident_lt", BM_mlp_step, wide, true, true, false, 1))
      ->ArgNames({"batch"})->Arg(256);
  bench::configure(benchmark::RegisterBenchmark("mlp_step/resident_unfused", BM_mlp_step, wide, true, false, false, 1))
      ->ArgNames({"batch"})->Arg(256);
  bench::configure(benchmark::RegisterBenchmark("mlp_step/resident_back_to_back", BM_mlp_step, wide, true, false, true, 16))
      ->ArgNames({"batch"})->Arg(256);
  bench::configure(benchmark::RegisterBenchmark("mlp_step_small/resident", BM_mlp_step, narrow, true, false, true, 1))
      ->ArgNames({"batch"})->Arg(4096);
  bench::configure(benchmark::RegisterBenchmark("mlp_step_small/resident_eager", BM_mlp_step, narrow, false, false, true, 1))
      ->ArgNames({"batch"})->Arg(4096);
  bench::configure(benchmark::RegisterBenchmark("mlp_step_small/resident_lt", BM_mlp_step, narrow, true, true, false, 1))
      ->ArgNames({"batch"})->Arg(4096);
  bench::configure(benchmark::RegisterBenchmark("gemm_ceiling/sgemm", BM_sgemm_ceiling))
      ->ArgNames({"size"})->Arg(4096);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
