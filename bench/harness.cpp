#include "bench/harness.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/device_info.h"

#ifndef RESIDENT_SOURCE_DIR
#define RESIDENT_SOURCE_DIR "."
#endif
#ifndef RESIDENT_BUILD_TYPE
#define RESIDENT_BUILD_TYPE "unknown"
#endif

namespace resident::bench {

namespace {

double statistic_min(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
}
double statistic_max(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
}

// The commit being measured: $RESIDENT_GIT_COMMIT when set (a copy of the tree without .git),
// else asked of git, else "unknown".
std::string git_commit() {
  if (const char* commit = std::getenv("RESIDENT_GIT_COMMIT"); commit != nullptr && commit[0] != '\0')
    return commit;
  const std::string command = std::string("git -C '") + RESIDENT_SOURCE_DIR +
                              "' rev-parse --short=12 HEAD 2>/dev/null";
  std::string out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    std::array<char, 64> buffer{};
    if (std::fgets(buffer.data(), buffer.size(), pipe)) out = buffer.data();
    pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (out.empty()) return "unknown";
  FILE* dirty = popen((std::string("git -C '") + RESIDENT_SOURCE_DIR +
                       "' status --porcelain --untracked-files=no 2>/dev/null")
                          .c_str(),
                      "r");
  if (dirty != nullptr) {
    if (std::fgetc(dirty) != EOF) out += "-dirty";
    pclose(dirty);
  }
  return out;
}

double limit_counter(const std::optional<std::uint64_t>& limit) {
  return limit ? static_cast<double>(*limit) : -1.0;
}

}  // namespace

void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "bench: %s failed: %s\n", call, cudaGetErrorString(status));
    std::abort();
  }
}

benchmark::internal::Benchmark* configure(benchmark::internal::Benchmark* b, int repetitions) {
  return b->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Repetitions(repetitions)
      ->ComputeStatistics("min", statistic_min)
      ->ComputeStatistics("max", statistic_max);
}

void add_context() {
  std::string reason;
  const auto info = probe_device(&reason);
  if (!info) {
    benchmark::AddCustomContext("gpu_name", "none (" + reason + ")");
    return;
  }
  benchmark::AddCustomContext("gpu_name", info->name);
  benchmark::AddCustomContext("driver_cuda_version", version_string(info->driver_version));
  benchmark::AddCustomContext("runtime_cuda_version", version_string(info->runtime_version));
  benchmark::AddCustomContext("sm_max_clock_mhz", std::to_string(info->sm_clock_khz / 1000));
  benchmark::AddCustomContext("multiprocessors", std::to_string(info->multiprocessors));
  benchmark::AddCustomContext("git_commit", git_commit());
  benchmark::AddCustomContext("resident_build_type", RESIDENT_BUILD_TYPE);
}

audit::TransferContract zero_transfer_contract() {
  audit::TransferContract c;
  c.max_d2h_scalar = 0;
  c.max_d2h_bulk = 0;
  c.max_h2d = 0;
  c.max_syncs = 0;
  return c;
}

TimedPhase::TimedPhase(benchmark::State& state, std::string phase, audit::TransferContract contract,
                       cudaStream_t stream, bool traced)
    : state_(state), phase_(std::move(phase)), contract_(std::move(contract)), stream_(stream) {
  contract_.phase = phase_;
  const char* untraced = std::getenv("RESIDENT_BENCH_UNTRACED");
  if (untraced != nullptr && std::string_view(untraced) == "1") traced = false;
  if (traced) {
    audit::TracerOptions options;
    options.unified_memory = false;  // see TracerOptions::unified_memory
    audit::Tracer::instance().start(options);  // no-op when already running
  }
  check_cuda(cudaEventCreate(&start_), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop_), "cudaEventCreate");
}

TimedPhase::~TimedPhase() {
  if (start_ != nullptr) (void)cudaEventDestroy(start_);
  if (stop_ != nullptr) (void)cudaEventDestroy(stop_);
}

void TimedPhase::record_start() { check_cuda(cudaEventRecord(start_, stream_), "cudaEventRecord"); }

void TimedPhase::record_stop() { check_cuda(cudaEventRecord(stop_, stream_), "cudaEventRecord"); }

void TimedPhase::wait_and_set_time() {
  check_cuda(cudaEventSynchronize(stop_), "cudaEventSynchronize");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
  const double per_step = static_cast<double>(ms) * 1e-3 / steps_per_iteration_;
  state_.SetIterationTime(per_step);
  timed_seconds_ += per_step;
}

void TimedPhase::count_steps_per_iteration(int steps) {
  if (steps < 1) {
    std::fprintf(stderr, "bench: steps per iteration must be >= 1 (got %d)\n", steps);
    std::abort();
  }
  steps_per_iteration_ = steps;
}

void TimedPhase::set_rate(const char* name, double per_iteration) {
  if (timed_seconds_ <= 0.0) return;
  state_.counters[name] =
      per_iteration * static_cast<double>(state_.iterations()) / timed_seconds_;
}

void TimedPhase::wait() { check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

void TimedPhase::finish() {
  const double iterations =
      static_cast<double>(std::max<benchmark::IterationCount>(state_.iterations(), 1)) *
      steps_per_iteration_;
  if (!audit::Tracer::instance().running()) {
    // Nothing was counted, so there is nothing to hold to the contract.
    state_.counters["audit.traced"] = 0.0;
    return;
  }
  state_.counters["contract.max_d2h_scalar"] = limit_counter(contract_.max_d2h_scalar);
  state_.counters["contract.max_d2h_bulk"] = limit_counter(contract_.max_d2h_bulk);
  state_.counters["contract.max_h2d"] = limit_counter(contract_.max_h2d);
  state_.counters["contract.max_syncs"] = limit_counter(contract_.max_syncs);
  state_.counters["contract.allow_mapped"] = contract_.allow_mapped ? 1.0 : 0.0;
  const audit::AuditReport report = audit::Tracer::instance().snapshot();
  const audit::PhaseReport* phase = report.find(phase_);
  const audit::PhaseCounters c = phase ? phase->counters : audit::PhaseCounters{};
  const auto per_iteration = [&](std::uint64_t n) { return static_cast<double>(n) / iterations; };
  state_.counters["audit.traced"] = 1.0;
  state_.counters["audit.d2h_scalar"] = per_iteration(c.d2h_scalar);
  state_.counters["audit.d2h_bulk"] = per_iteration(c.d2h_bulk);
  state_.counters["audit.d2h_bulk_bytes"] = per_iteration(c.d2h_bulk_bytes);
  state_.counters["audit.h2d"] = per_iteration(c.h2d);
  state_.counters["audit.h2d_bytes"] = per_iteration(c.h2d_bytes);
  state_.counters["audit.syncs"] = per_iteration(c.syncs());
  const audit::TracerOptions options = audit::Tracer::instance().options();
  if (options.activity && options.unified_memory)  // else not measured: no counter at all
    state_.counters["audit.um_d2h_bytes"] = per_iteration(c.um_d2h_bytes);
  state_.counters["audit.mapped_allocs"] = per_iteration(c.mapped_allocs + c.managed_allocs);
  audit::Tracer::instance().reset();
}

}  // namespace resident::bench
