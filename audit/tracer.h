// The CUPTI transfer tracer and its phases.
//
//   resident::audit::Tracer::instance().start();
//   { resident::audit::Phase epoch("epoch");  ... work ... }
//   AuditReport report = resident::audit::Tracer::instance().snapshot();
//
// What is counted, and how:
// - Copies and memsets: CUPTI activity records (MEMCPY, MEMCPY2, MEMSET) give direction,
//   bytes and host memory kind. Each record is joined by correlation id to the API call that
//   issued it (runtime and driver callbacks on every memcpy/memset/graph-launch entry point),
//   and so to the phase active on the issuing thread when the call was made, never to the
//   phase active when the record arrives. A copy inside a graph is attributed to the
//   cudaGraphLaunch that ran it. Memory stays bounded over long runs: a call is forgotten at
//   its first record, and a graph launch (most graphs have no copy node, so never yield one)
//   after 2^16 later graph-launch ids; a record arriving later than that is attributed by
//   timestamp, and the report says how many were.
// - Synchronizations: counted at the API (callbacks), by kind: device (cudaDeviceSynchronize,
//   cuCtxSynchronize), stream, event; "implicit" counts host<->device copies issued by a
//   blocking API (cudaMemcpy, cudaMemcpy2D, cudaMemcpyFromSymbol, cuMemcpyDtoH, ...) and
//   async device->host copies into pageable memory, which return only once complete.
//   A driver call made inside a runtime call is not counted twice.
// - Unified memory: the UNIFIED_MEMORY_COUNTER activity (bytes migrated each way),
//   attributed by timestamp to the innermost phase open at that time.
// - Mapped/managed memory: cudaHostAlloc/cuMemHostAlloc with the mapped flag,
//   cudaHostRegister/cuMemHostRegister with the mapped flag, cudaHostGetDevicePointer,
//   cudaMallocManaged/cuMemAllocManaged, counted when the call succeeds.
// CUPTI allows one subscriber per process: start() fails with a clear AuditError when
// another tool (resident-audit's injection, Nsight) is already attached.
// CUPTI's activity buffer callbacks are one pair per process: start() also fails while a
// KernelTimeline (audit/kernel_timeline.h) runs, and a KernelTimeline does not start while the
// Tracer runs.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include "audit/report.h"

namespace resident::audit {

class AuditError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TracerOptions {
  bool capture_d2h_stacks = true;    // host call stack of every device->host copy
  bool capture_sync_stacks = false;  // ... and of every synchronization
  bool follow_nvtx = false;          // phases from the program's NVTX push/pop (injection)
  std::size_t max_sites_per_phase = 8;
  // Halves of the tracer, separable only to measure what each costs (the overhead bench);
  // counts are incomplete unless both are on.
  bool api_callbacks = true;  // phases, call sites, syncs, allocations
  bool activity = true;       // copy and memset records (and unified-memory counters)
  // Unified-memory migration bytes. Managed allocations are counted either way; the migration
  // counters cost kernel launches measurably (bench/audit_overhead_bench), so the benches turn
  // them off and the tests keep them on.
  bool unified_memory = true;
};

class Tracer {
 public:
  static Tracer& instance();

  // Subscribes to CUPTI and enables the activity kinds. Creates the CUDA context if none
  // exists (unified-memory counters can only be enabled once one does). Idempotent.
  void start(const TracerOptions& options = {});
  // Flushes, then unsubscribes. Counters are kept until the next start().
  void stop();
  bool running() const;
  // API calls (copies, memsets, graph launches) still waiting for their first activity record:
  // for tests of the tracer's memory bound (a graph without copy or memset nodes never yields
  // one; such launches are forgotten oldest first).
  std::size_t pending_calls() const;
  // The options of the running (or last) start().
  TracerOptions options() const;

  // Waits for the device (uncounted), flushes every activity buffer and returns the counters
  // of every phase used so far. Call it outside the phases it reports on.
  AuditReport snapshot();
  // Same, without waiting for the device (for process exit).
  AuditReport snapshot_without_sync();
  // Flushes, then forgets all counters and call sites (phase names are kept).
  void reset();

 private:
  Tracer() = default;
};

// An RAII phase: pushes `name` onto this thread's phase stack (phases nest: "dqn" then
// "epoch" is "dqn/epoch") and an NVTX range of the same name.
class Phase {
 public:
  explicit Phase(std::string_view name);
  ~Phase();
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;
};

// The full path of this thread's innermost phase, or "(unscoped)".
std::string current_phase();

}  // namespace resident::audit
