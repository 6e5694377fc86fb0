// KernelTimeline: the GPU start and end of every kernel that runs while it is started, from
// CUPTI activity records of kind CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL (which, unlike
// CUPTI_ACTIVITY_KIND_KERNEL, does not serialize kernels).
//
//   resident::audit::KernelTimeline timeline;
//   timeline.start();
//   ... launch work, replay graphs ...
//   const KernelTimelineResult result = timeline.stop_and_collect();  // waits for the device
//
// Contract:
// - One KernelTimeline runs at a time in a process, and never beside the audit Tracer: CUPTI's
//   activity buffer callbacks (cuptiActivityRegisterCallbacks) are one pair per process, so
//   start() throws AuditError while the Tracer or another KernelTimeline runs, and
//   Tracer::start() throws while a KernelTimeline runs. start() also throws when another CUPTI
//   subscriber (resident-audit's injection, Nsight) is attached; the timeline holds a
//   subscription (with no callback enabled) while it runs, so none can attach meanwhile.
// - A kernel is recorded when it executes while the timeline runs; kernels inside CUDA graph
//   replays are recorded one by one (graph_node_id and graph_id set, correlation_id that of the
//   graph launch, so all kernels of one replay share it). Records carry CUPTI timestamps
//   (ns), comparable with timestamp_ns().
// - Memory is bounded: at most options.max_records records are kept; later ones are counted
//   in dropped_over_cap. Records CUPTI itself dropped (no buffer space) are counted in
//   dropped_by_cupti. When either is non-zero the result's counts are lower bounds (notes()
//   says so). Records without both timestamps are counted in incomplete and left out.
// - Every CUPTI and CUDA call is checked: a failure throws AuditError naming the call and the
//   file:line. stop_and_collect() leaves the timeline stopped even when it throws.
// - The destructor stops a running timeline (discarding its records) and never throws.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace resident::audit {

struct KernelRecord {
  std::string name;  // demangled when CUPTI gives a mangled name ("void ns::k<4>(float*)")
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::uint32_t device_id = 0;
  std::uint32_t stream_id = 0;
  std::uint32_t correlation_id = 0;  // of the launch API call (the graph launch for graph nodes)
  std::uint64_t graph_node_id = 0;   // 0: not launched by a graph
  std::uint32_t graph_id = 0;        // 0: not launched by a graph
  std::array<std::int32_t, 3> grid{};
  std::array<std::int32_t, 3> block{};

  std::uint64_t duration_ns() const noexcept { return end_ns - start_ns; }
};

struct KernelTimelineOptions {
  std::size_t max_records = std::size_t{1} << 20;  // >= 1
};

struct KernelTimelineResult {
  std::vector<KernelRecord> kernels;  // sorted by start, then end, then stream id
  std::uint64_t dropped_by_cupti = 0;
  std::uint64_t dropped_over_cap = 0;
  std::uint64_t incomplete = 0;  // delivered without a start or end timestamp; left out

  // True when no record was dropped or left out.
  bool complete() const noexcept {
    return dropped_by_cupti == 0 && dropped_over_cap == 0 && incomplete == 0;
  }
  // One line per loss ("CUPTI dropped 12 kernel records: counts are lower bounds"); empty when
  // complete().
  std::vector<std::string> notes() const;
};

class KernelTimeline {
 public:
  // Throws AuditError when options.max_records is 0.
  explicit KernelTimeline(const KernelTimelineOptions& options = {});
  ~KernelTimeline();
  KernelTimeline(const KernelTimeline&) = delete;
  KernelTimeline& operator=(const KernelTimeline&) = delete;

  // Enables kernel activity records. Throws AuditError when this or another timeline is
  // running, when the audit Tracer is running, when another CUPTI subscriber is attached, or
  // when a CUPTI call fails (nothing stays enabled then).
  void start();
  // Waits for the device (cudaDeviceSynchronize), flushes CUPTI's buffers, disables the
  // records and returns what was collected since start(). Throws AuditError when not running
  // or when a CUDA or CUPTI call fails.
  KernelTimelineResult stop_and_collect();
  bool running() const noexcept;

  // Whether any KernelTimeline of this process is running (what Tracer::start() checks).
  static bool any_running() noexcept;
  // CUPTI's current timestamp (ns), on the clock of the records' start_ns and end_ns.
  static std::uint64_t timestamp_ns();

 private:
  KernelTimelineOptions options_;
  bool running_ = false;
};

}  // namespace resident::audit
