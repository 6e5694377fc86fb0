// The audit's own overhead: a launch-heavy epoch (many tiny kernels and one sanctioned scalar
// readback) timed with the tracer detached and attached, side by side in one run.
// Rows: audit_overhead/untraced; /traced as the benches run it (no unified-memory counters);
// /traced_with_unified_memory as the tests run it; and the tracer's two halves alone
// (/activity_only, /callbacks_only) to show where its cost is. bench/run-benches runs each row in its own
// process: CUPTI, once attached, stays loaded for the life of a process.
#include <benchmark/benchmark.h>

#include <utility>

#include "bench/harness.h"
#include "lib/core/device_buffer.h"
#include "lib/core/scalar_readback.h"
#include "lib/core/stream.h"

namespace {

constexpr int kLaunchesPerEpoch = 2000;
constexpr int kElements = 4096;

__global__ void axpy_step(float* x, int n, float a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * x[i] + 1.0f;
}

enum class Tracing { kOff, kBench, kWithUnifiedMemory, kActivityOnly, kCallbacksOnly };

void BM_launch_heavy_epoch(benchmark::State& state, Tracing tracing) {
  auto& tracer = resident::audit::Tracer::instance();
  tracer.stop();
  if (tracing != Tracing::kOff) {
    resident::audit::TracerOptions options;
    options.activity = tracing != Tracing::kCallbacksOnly;
    options.api_callbacks = tracing != Tracing::kActivityOnly;
    options.unified_memory = tracing == Tracing::kWithUnifiedMemory;
    tracer.start(options);
  }
  resident::Stream stream;
  resident::DeviceBuffer<float> x(kElements);
  resident::bench::check_cuda(cudaMemsetAsync(x.data(), 0, x.bytes(), stream.get()), "cudaMemsetAsync");
  resident::ScalarReadback<float> readback;
  const auto epoch = [&] {
    for (int k = 0; k < kLaunchesPerEpoch; ++k)
      axpy_step<<<kElements / 256, 256, 0, stream.get()>>>(x.data(), kElements, 0.5f);
    readback.enqueue(x.data(), stream.get());
    benchmark::DoNotOptimize(readback.wait());
  };
  resident::audit::TransferContract contract;
  contract.max_d2h_scalar = 1;
  contract.max_d2h_bulk = 0;
  contract.max_h2d = 0;
  contract.max_syncs = 1;
  resident::bench::TimedPhase timed(state, "audit_overhead/epoch", contract, stream.get(),
                                    tracing != Tracing::kOff);
  timed.warm_up(epoch);
  for (auto _ : state) timed.iteration(epoch);
  timed.finish();
  timed.set_rate("launches_per_s", static_cast<double>(kLaunchesPerEpoch));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  resident::bench::add_context();
  const std::pair<const char*, Tracing> rows[] = {
      {"audit_overhead/untraced", Tracing::kOff},
      {"audit_overhead/traced", Tracing::kBench},
      {"audit_overhead/traced_with_unified_memory", Tracing::kWithUnifiedMemory},
      {"audit_overhead/activity_only", Tracing::kActivityOnly},
      {"audit_overhead/callbacks_only", Tracing::kCallbacksOnly}};
  for (const auto& [name, tracing] : rows)
    resident::bench::configure(benchmark::RegisterBenchmark(name, BM_launch_heavy_epoch, tracing),
                               /*repetitions=*/10);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
