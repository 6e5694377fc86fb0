#include "audit/kernel_timeline.h"

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "audit/cupti_check.h"
#include "audit/tracer.h"

namespace resident::audit {

namespace {

// A kernel record as kept while the timeline runs: fixed size, the name by index.
struct RawKernel {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::uint64_t graph_node_id = 0;
  std::uint32_t device_id = 0;
  std::uint32_t stream_id = 0;
  std::uint32_t correlation_id = 0;
  std::uint32_t graph_id = 0;
  std::uint32_t name_index = 0;
  std::array<std::int32_t, 3> grid{};
  std::array<std::int32_t, 3> block{};
};

// Process-wide: CUPTI delivers activity buffers to one pair of callbacks per process.
struct TimelineState {
  std::mutex mutex;
  std::atomic<bool> running{false};
  bool collecting = false;  // buffers delivered while false are freed unread
  std::size_t max_records = 0;
  std::vector<RawKernel> kernels;
  // CUPTI shares one name string among the records of a kernel: interned by its address.
  std::unordered_map<const char*, std::uint32_t> name_index;
  std::vector<std::string> names;
  std::uint64_t dropped_by_cupti = 0;
  std::uint64_t dropped_over_cap = 0;
  std::uint64_t incomplete = 0;
  std::string callback_error;  // the first CUPTI failure seen on CUPTI's thread
  CUpti_SubscriberHandle subscriber = nullptr;

  // Caller holds `mutex`.
  void clear() {
    kernels.clear();
    kernels.shrink_to_fit();
    name_index.clear();
    names.clear();
    dropped_by_cupti = dropped_over_cap = incomplete = 0;
    callback_error.clear();
  }
};

TimelineState& state() {
  static TimelineState* s = new TimelineState();  // never destroyed: CUPTI may call at exit
  return *s;
}

constexpr std::size_t kActivityBufferBytes = std::size_t{4} << 20;

// Caller holds s.mutex.
void keep(TimelineState& s, const CUpti_ActivityKernel10& r) {
  if (r.start == 0 || r.end == 0 || r.end < r.start) {
    ++s.incomplete;
    return;
  }
  if (s.kernels.size() >= s.max_records) {
    ++s.dropped_over_cap;
    return;
  }
  const char* name = r.name != nullptr ? r.name : "(unnamed kernel)";
  auto [it, inserted] = s.name_index.try_emplace(name, static_cast<std::uint32_t>(s.names.size()));
  if (inserted) s.names.emplace_back(name);
  RawKernel k;
  k.start = r.start;
  k.end = r.end;
  k.graph_node_id = r.graphNodeId;
  k.device_id = r.deviceId;
  k.stream_id = r.streamId;
  k.correlation_id = r.correlationId;
  k.graph_id = r.graphId;
  k.name_index = it->second;
  k.grid = {r.gridX, r.gridY, r.gridZ};
  k.block = {r.blockX, r.blockY, r.blockZ};
  s.kernels.push_back(k);
}

// The buffers are std::aligned_alloc'd and std::free'd, like the Tracer's: a buffer one of them
// handed to CUPTI and the other gets back is released correctly, and each skips the other's
// record kinds.
void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, kActivityBufferBytes));
  *size = *buffer != nullptr ? kActivityBufferBytes : 0;  // 0: CUPTI drops and counts records
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer,
                               std::size_t /*size*/, std::size_t valid_size) {
  TimelineState& s = state();
  {
    const std::lock_guard<std::mutex> lock(s.mutex);
    if (s.collecting && buffer != nullptr) {
      CUpti_Activity* record = nullptr;
      for (;;) {
        const CUptiResult next = cuptiActivityGetNextRecord(buffer, valid_size, &record);
        if (next == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // the end of the buffer
        if (next != CUPTI_SUCCESS) {
          if (s.callback_error.empty())
            s.callback_error = "audit: cuptiActivityGetNextRecord failed with " +
                               detail::cupti_error_text(next) + " (kernel records lost) at " +
                               __FILE__ + ":" + std::to_string(__LINE__);
          break;
        }
        if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
            record->kind == CUPTI_ACTIVITY_KIND_KERNEL)
          keep(s, *reinterpret_cast<const CUpti_ActivityKernel10*>(record));
      }
      std::size_t dropped = 0;
      const CUptiResult counted = cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped);
      if (counted == CUPTI_SUCCESS) {
        s.dropped_by_cupti += dropped;
      } else if (s.callback_error.empty()) {
        s.callback_error = "audit: cuptiActivityGetNumDroppedRecords failed with " +
                           detail::cupti_error_text(counted) + " at " + __FILE__ + ":" +
                           std::to_string(__LINE__);
      }
    }
  }
  std::free(buffer);
}

void CUPTIAPI ignore_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// "_ZN2ns1kEPf" -> "ns::k(float*)"; names that are not mangled C++ come back unchanged.
std::string demangled(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  char* text = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || text == nullptr) {
    std::free(text);
    return name;
  }
  std::string result = text;
  std::free(text);
  return result;
}

// Runs every step, keeping the first exception to rethrow at the end.
class FirstFailure {
 public:
  template <class F>
  void attempt(F&& step) {
    try {
      step();
    } catch (...) {
      if (!first_) first_ = std::current_exception();
    }
  }
  void rethrow() const {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::exception_ptr first_;
};

// Disables the records and ends the subscription; every step runs even when one fails.
// Caller owns the running timeline.
FirstFailure shut_down(TimelineState& s) {
  FirstFailure failure;
  failure.attempt([] { AUDIT_CUPTI_CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)); });
  failure.attempt([] { AUDIT_CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)); });
  failure.attempt([&s] {
    if (s.subscriber == nullptr) return;
    const CUpti_SubscriberHandle subscriber = s.subscriber;
    s.subscriber = nullptr;
    AUDIT_CUPTI_CHECK(cuptiUnsubscribe(subscriber));
  });
  {
    const std::lock_guard<std::mutex> lock(s.mutex);
    s.collecting = false;
  }
  s.running = false;
  return failure;
}

}  // namespace

std::vector<std::string> KernelTimelineResult::notes() const {
  std::vector<std::string> notes;
  if (dropped_by_cupti > 0)
    notes.push_back("CUPTI dropped " + std::to_string(dropped_by_cupti) +
                    " activity records: kernel counts are lower bounds");
  if (dropped_over_cap > 0)
    notes.push_back(std::to_string(dropped_over_cap) +
                    " kernel records past the cap (KernelTimelineOptions::max_records) were not "
                    "kept: kernel counts are lower bounds");
  if (incomplete > 0)
    notes.push_back(std::to_string(incomplete) +
                    " kernel records without start or end timestamp were left out: kernel counts "
                    "are lower bounds");
  return notes;
}

KernelTimeline::KernelTimeline(const KernelTimelineOptions& options) : options_(options) {
  if (options_.max_records == 0)
    throw AuditError("audit: KernelTimelineOptions::max_records = 0, allowed >= 1");
}

KernelTimeline::~KernelTimeline() {
  if (!running_) return;
  try {
    (void)shut_down(state());
  } catch (...) {  // destructors never throw
  }
  running_ = false;
}

bool KernelTimeline::running() const noexcept { return running_; }

bool KernelTimeline::any_running() noexcept { return state().running; }

std::uint64_t KernelTimeline::timestamp_ns() {
  std::uint64_t t = 0;
  AUDIT_CUPTI_CHECK(cuptiGetTimestamp(&t));
  return t;
}

void KernelTimeline::start() {
  TimelineState& s = state();
  if (running_ || s.running)
    throw AuditError("audit: KernelTimeline::start: a KernelTimeline is already running in this "
                     "process (one at a time)");
  if (Tracer::instance().running())
    throw AuditError("audit: KernelTimeline::start: the audit Tracer is running; CUPTI's activity "
                     "buffer callbacks are one per process, so stop the Tracer first");
  CUpti_SubscriberHandle subscriber = nullptr;
  const CUptiResult subscribed = cuptiSubscribe(&subscriber, ignore_callback, nullptr);
  if (subscribed == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    throw AuditError(
        "audit: KernelTimeline::start: another CUPTI subscriber is active in this process "
        "(resident-audit's injection, Nsight Systems or Compute?); run without it");
  detail::check_cupti(subscribed, "cuptiSubscribe(&subscriber, ignore_callback, nullptr)", __FILE__,
                      __LINE__);
  {
    const std::lock_guard<std::mutex> lock(s.mutex);
    s.clear();
    s.max_records = options_.max_records;
    s.subscriber = subscriber;
    s.collecting = true;
  }
  s.running = true;
  try {
    AUDIT_CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    AUDIT_CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  } catch (...) {
    (void)shut_down(s);  // the start's own failure is the one to report
    throw;
  }
  running_ = true;
}

KernelTimelineResult KernelTimeline::stop_and_collect() {
  if (!running_)
    throw AuditError("audit: KernelTimeline::stop_and_collect: the timeline is not running");
  TimelineState& s = state();
  FirstFailure failure;
  // Kernels still running have no end timestamp yet: wait for them before the flush.
  failure.attempt([] { AUDIT_CUDA_CHECK(cudaDeviceSynchronize()); });
  FirstFailure shutdown = shut_down(s);
  running_ = false;
  failure.attempt([&shutdown] { shutdown.rethrow(); });

  KernelTimelineResult result;
  std::string callback_error;
  {
    const std::lock_guard<std::mutex> lock(s.mutex);
    callback_error = s.callback_error;
    result.dropped_by_cupti = s.dropped_by_cupti;
    result.dropped_over_cap = s.dropped_over_cap;
    result.incomplete = s.incomplete;
    std::vector<std::string> names;
    names.reserve(s.names.size());
    for (const std::string& name : s.names) names.push_back(demangled(name));
    result.kernels.reserve(s.kernels.size());
    for (const RawKernel& k : s.kernels) {
      KernelRecord r;
      r.name = names[k.name_index];
      r.start_ns = k.start;
      r.end_ns = k.end;
      r.device_id = k.device_id;
      r.stream_id = k.stream_id;
      r.correlation_id = k.correlation_id;
      r.graph_node_id = k.graph_node_id;
      r.graph_id = k.graph_id;
      r.grid = k.grid;
      r.block = k.block;
      result.kernels.push_back(std::move(r));
    }
    s.clear();
  }
  failure.rethrow();
  if (!callback_error.empty()) throw AuditError(callback_error);
  std::sort(result.kernels.begin(), result.kernels.end(),
            [](const KernelRecord& a, const KernelRecord& b) {
              return std::tie(a.start_ns, a.end_ns, a.stream_id) <
                     std::tie(b.start_ns, b.end_ns, b.stream_id);
            });
  return result;
}

}  // namespace resident::audit
