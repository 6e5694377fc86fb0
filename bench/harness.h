// The shared benchmark harness on Google Benchmark. Each timed region runs inside an audit
// phase and is timed with CUDA events (manual time); warm-up is excluded; repetitions report
// median/min/max; each row carries the audit's counters (per iteration) and its contract.
//
//   void BM_x(benchmark::State& state) {
//     resident::bench::TimedPhase timed(state, "x/epoch", contract, stream);
//     timed.warm_up([&] { step(); });
//     for (auto _ : state) timed.iteration([&] { step(); });
//     timed.finish();  // counters: audit.*, contract.*
//   }
//   resident::bench::configure(benchmark::RegisterBenchmark("x/resident", BM_x));
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <string>

#include "audit/contract.h"
#include "audit/tracer.h"

namespace resident::bench {

// Google Benchmark's default minimum time of a repetition (--benchmark_min_time), in seconds of
// the time a row reports (manual time here).
inline constexpr double kDefaultMinTimeSeconds = 0.5;

// Manual time, repetitions (default 5) with median/min/max, microseconds.
benchmark::internal::Benchmark* configure(benchmark::internal::Benchmark* b, int repetitions = 5);

// Adds the GPU, driver, CUDA runtime, SM clock, git commit and build type to the JSON context.
void add_context();

// The contract of a resident hot path: no copy either way, no host synchronization.
audit::TransferContract zero_transfer_contract();

class TimedPhase {
 public:
  // `phase` is the audit phase of one iteration; `contract` its transfer contract (its phase
  // field is ignored); `stream` the stream the timed work runs on. With `traced` the audit is
  // started if it is not running (without unified-memory counters); without it the row
  // carries no counters (the audit overhead bench's baseline). RESIDENT_BENCH_UNTRACED=1 in the
  // environment turns the audit off for every row: for profilers such as ncu, which cannot
  // share CUPTI with it (such rows have audit.traced = 0 and fail the transfer gate).
  TimedPhase(benchmark::State& state, std::string phase, audit::TransferContract contract,
             cudaStream_t stream, bool traced = true);
  ~TimedPhase();
  TimedPhase(const TimedPhase&) = delete;
  TimedPhase& operator=(const TimedPhase&) = delete;

  template <class Body>
  void warm_up(Body&& body, int iterations = 3) {
    for (int i = 0; i < iterations; ++i) body();
    wait();
    if (audit::Tracer::instance().running()) audit::Tracer::instance().reset();
  }

  // One timed iteration: inside the audit phase, CUDA events bracket `body` alone (the phase's
  // own NVTX push/pop, and the audit callbacks on them, stay outside the timed window); then
  // the wait for the stop event, outside the phase (a sync the contracts do not allow).
  template <class Body>
  void iteration(Body&& body) {
    {
      const audit::Phase phase(phase_);
      record_start();
      body();
      record_stop();
    }
    wait_and_set_time();
  }

  // For a window that runs `steps` steps back to back: each iteration's time, the rates and the
  // audit counters become per step (one step = window / steps). Call before the first iteration.
  void count_steps_per_iteration(int steps);

  // Attaches the audit counters (per iteration) and the contract to the row.
  void finish();
  // Sum of the timed iterations' CUDA-event times. Rates must be computed from this: Google
  // Benchmark's kIsRate divides by CPU time, not by the manual time.
  double timed_seconds() const noexcept { return timed_seconds_; }
  // counters[name] = per_iteration * iterations / timed_seconds().
  void set_rate(const char* name, double per_iteration);

 private:
  void record_start();
  void record_stop();
  void wait_and_set_time();
  void wait();

  benchmark::State& state_;
  std::string phase_;
  audit::TransferContract contract_;
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  double timed_seconds_ = 0.0;
  int steps_per_iteration_ = 1;
};

// Aborts the benchmark run with a message (CUDA failure in a bench is not a result).
void check_cuda(cudaError_t status, const char* call);

}  // namespace resident::bench
