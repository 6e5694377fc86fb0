#include "audit/tracer.h"

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <generated_nvtx_meta.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cctype>
#include <array>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "audit/call_stack.h"
#include "audit/cupti_check.h"
#include "audit/kernel_timeline.h"

namespace resident::audit {

namespace {

// ---------------------------------------------------------------------------------------------
// What each traced API entry point is.

enum class ApiKind : std::uint8_t {
  kUntraced,
  kCopy,
  kMemset,
  kGraphLaunch,
  kSyncDevice,
  kSyncStream,
  kSyncEvent,
  kHostAlloc,         // flags decide whether it is mapped
  kHostRegister,      // flags decide whether it is mapped
  kHostDevicePointer, // always zero-copy use
  kManagedAlloc,
};

struct ApiInfo {
  ApiKind kind = ApiKind::kUntraced;
  bool blocking = false;  // a copy API that returns only once the copy is done
  std::string name;       // as users write it: "cudaMemcpy", not "cudaMemcpy_v3020"
};

// "cudaMemcpyAsync_ptsz_v7000" -> "cudaMemcpyAsync"; "cuMemcpyDtoH_v2" -> "cuMemcpyDtoH".
std::string display_name(const char* cupti_name) {
  std::string name = cupti_name;
  for (const char* suffix : {"_ptds", "_ptsz"})
    if (const std::size_t at = name.find(suffix); at != std::string::npos) name.erase(at, 5);
  if (const std::size_t at = name.rfind("_v"); at != std::string::npos && at + 2 < name.size() &&
                                               std::isdigit(static_cast<unsigned char>(name[at + 2])))
    name.erase(at);
  return name;
}

bool starts_with(const char* s, const char* prefix) {
  return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

// Classifies by CUPTI's callback name, so new versions of an entry point (_v2, _ptds) are
// covered without listing them.
ApiInfo classify_runtime(const char* name) {
  ApiInfo info;
  info.name = display_name(name);
  if (starts_with(name, "cudaMemcpy")) {
    info.kind = ApiKind::kCopy;
    info.blocking = std::strstr(name, "Async") == nullptr;
  } else if (starts_with(name, "cudaMemset")) {
    info.kind = ApiKind::kMemset;
  } else if (starts_with(name, "cudaGraphLaunch")) {
    info.kind = ApiKind::kGraphLaunch;
  } else if (starts_with(name, "cudaDeviceSynchronize") || starts_with(name, "cudaThreadSynchronize")) {
    info.kind = ApiKind::kSyncDevice;
  } else if (starts_with(name, "cudaStreamSynchronize")) {
    info.kind = ApiKind::kSyncStream;
  } else if (starts_with(name, "cudaEventSynchronize")) {
    info.kind = ApiKind::kSyncEvent;
  } else if (starts_with(name, "cudaHostAlloc")) {
    info.kind = ApiKind::kHostAlloc;
  } else if (starts_with(name, "cudaHostRegister")) {
    info.kind = ApiKind::kHostRegister;
  } else if (starts_with(name, "cudaHostGetDevicePointer")) {
    info.kind = ApiKind::kHostDevicePointer;
  } else if (starts_with(name, "cudaMallocManaged")) {
    info.kind = ApiKind::kManagedAlloc;
  }
  return info;
}

ApiInfo classify_driver(const char* name) {
  ApiInfo info;
  info.name = display_name(name);
  if (starts_with(name, "cuMemcpy")) {
    info.kind = ApiKind::kCopy;
    info.blocking = std::strstr(name, "Async") == nullptr;
  } else if (starts_with(name, "cuMemsetD")) {
    info.kind = ApiKind::kMemset;
  } else if (starts_with(name, "cuGraphLaunch")) {
    info.kind = ApiKind::kGraphLaunch;
  } else if (starts_with(name, "cuCtxSynchronize")) {
    info.kind = ApiKind::kSyncDevice;
  } else if (starts_with(name, "cuStreamSynchronize")) {
    info.kind = ApiKind::kSyncStream;
  } else if (starts_with(name, "cuEventSynchronize")) {
    info.kind = ApiKind::kSyncEvent;
  } else if (starts_with(name, "cuMemHostAlloc")) {
    info.kind = ApiKind::kHostAlloc;
  } else if (starts_with(name, "cuMemHostRegister")) {
    info.kind = ApiKind::kHostRegister;
  } else if (starts_with(name, "cuMemHostGetDevicePointer")) {
    info.kind = ApiKind::kHostDevicePointer;
  } else if (starts_with(name, "cuMemAllocManaged")) {
    info.kind = ApiKind::kManagedAlloc;
  }
  return info;
}

using detail::check_cupti;
using detail::cupti_error_text;

// ---------------------------------------------------------------------------------------------
// Per-call context joined to activity records by correlation id.

struct CallContext {
  std::uint32_t phase = 0;
  const char* api = "";
  bool blocking = false;
  bool internal = false;  // issued by the audit itself (snapshot's device sync)
  RawStack stack;
  // The correlation ids it waits under in State::pending: the runtime call's and those of the
  // driver calls it made. The first record to arrive forgets them all (a record carries the
  // driver call's id, and for a copy the runtime call's too, so the others would never match).
  // Ids past the array's size are left to the bounds below.
  std::array<std::uint32_t, 4> correlations{};
  std::uint8_t correlation_count = 0;
};
using ContextPtr = std::shared_ptr<CallContext>;

struct SiteAccum {
  CallSite site;  // frames filled at report time
  RawStack stack;
};

struct PhaseAccum {
  PhaseCounters counters;
  std::vector<SiteAccum> d2h_sites;
  std::vector<SiteAccum> sync_sites;
  std::uint64_t d2h_sites_dropped = 0;
  std::uint64_t sync_sites_dropped = 0;
};

struct Interval {
  std::uint64_t start = 0;
  std::uint64_t end = UINT64_MAX;
  std::uint32_t phase = 0;
};

constexpr std::uint32_t kUnscoped = 0;
constexpr std::size_t kRecentContexts = 4096;
// A graph launch yields records only for its copy and memset nodes, so a launch of a graph
// without them is never matched: a graph launch's ids (a runtime launch files two, its own and
// its driver call's) leave `pending` once this many later graph-launch ids came in (a record
// arriving after that is attributed by timestamp, and the report says so). Copies and memsets
// always yield a record unless the call failed; their larger bound only keeps failing calls
// from growing `pending` without end.
constexpr std::size_t kMaxPendingGraphLaunches = std::size_t{1} << 16;
constexpr std::size_t kMaxPendingTransfers = std::size_t{1} << 20;

thread_local std::vector<std::uint32_t> t_phase_stack;
thread_local std::vector<std::size_t> t_interval_stack;
thread_local int t_runtime_depth = 0;
thread_local ContextPtr t_runtime_context;
thread_local bool t_internal = false;

class State {
 public:
  std::mutex mutex;
  bool running = false;
  bool um_enabled = false;
  bool context_created = false;
  CUpti_SubscriberHandle subscriber = nullptr;
  TracerOptions options;
  std::array<ApiInfo, CUPTI_RUNTIME_TRACE_CBID_SIZE> runtime_apis{};
  std::array<ApiInfo, CUPTI_DRIVER_TRACE_CBID_SIZE> driver_apis{};

  std::vector<std::string> phase_names{kUnscopedPhase};
  std::unordered_map<std::string, std::uint32_t> phase_ids{{kUnscopedPhase, kUnscoped}};
  std::vector<Interval> intervals;
  std::unordered_map<std::uint32_t, ContextPtr> pending;   // correlation id -> call
  // The ids put into `pending`, oldest first (some long since matched), one queue per bound.
  std::deque<std::uint32_t> pending_graph_launches;
  std::deque<std::uint32_t> pending_transfers;
  std::vector<std::pair<std::uint32_t, ContextPtr>> recent; // consumed, for repeat records
  std::size_t recent_next = 0;
  std::vector<PhaseAccum> accum{PhaseAccum{}};
  std::vector<std::string> notes;
  std::uint64_t unmatched_records = 0;
  std::uint64_t dropped_records = 0;

  // Caller holds `mutex`.
  std::uint32_t intern(const std::string& path) {
    const auto [it, inserted] = phase_ids.emplace(path, static_cast<std::uint32_t>(phase_names.size()));
    if (inserted) {
      phase_names.push_back(path);
      accum.emplace_back();
    }
    return it->second;
  }

  // Caller holds `mutex`. Files `ctx` under `correlation` until its first record arrives, or
  // until the queue of its kind passes its bound.
  void remember(std::uint32_t correlation, const ContextPtr& ctx, bool graph_launch) {
    if (ctx->correlation_count < ctx->correlations.size())
      ctx->correlations[ctx->correlation_count++] = correlation;
    pending[correlation] = ctx;
    std::deque<std::uint32_t>& order = graph_launch ? pending_graph_launches : pending_transfers;
    const std::size_t bound = graph_launch ? kMaxPendingGraphLaunches : kMaxPendingTransfers;
    order.push_back(correlation);
    while (order.size() > bound) {
      pending.erase(order.front());  // a no-op when its record has arrived
      order.pop_front();
    }
  }

  ContextPtr take_context(std::uint32_t correlation) {
    if (const auto it = pending.find(correlation); it != pending.end()) {
      ContextPtr ctx = it->second;
      for (std::uint8_t i = 0; i < ctx->correlation_count; ++i) pending.erase(ctx->correlations[i]);
      if (recent.size() < kRecentContexts) {
        recent.emplace_back(correlation, ctx);
      } else {
        recent[recent_next] = {correlation, ctx};
        recent_next = (recent_next + 1) % kRecentContexts;
      }
      return ctx;
    }
    for (const auto& [id, ctx] : recent)
      if (id == correlation) return ctx;
    return nullptr;
  }

  std::uint32_t phase_at(std::uint64_t timestamp) const {
    // The innermost (latest-started) phase open at `timestamp`.
    for (auto it = intervals.rbegin(); it != intervals.rend(); ++it)
      if (it->start <= timestamp && timestamp < it->end) return it->phase;
    return kUnscoped;
  }

  void add_site(std::vector<SiteAccum>& sites, std::uint64_t& dropped, const char* api,
                const std::string& what, const RawStack& stack) {
    for (SiteAccum& s : sites) {
      if (s.site.api == api && s.site.what == what && s.stack == stack) {
        ++s.site.count;
        return;
      }
    }
    if (sites.size() >= options.max_sites_per_phase) {
      ++dropped;
      return;
    }
    SiteAccum s;
    s.site.api = api;
    s.site.what = what;
    s.site.count = 1;
    s.stack = stack;
    sites.push_back(std::move(s));
  }
};

State& state() {
  static State* s = new State();  // never destroyed: callbacks may run during exit
  return *s;
}

std::uint32_t current_phase_id() { return t_phase_stack.empty() ? kUnscoped : t_phase_stack.back(); }

std::uint64_t now() {
  std::uint64_t t = 0;
  if (cuptiGetTimestamp(&t) != CUPTI_SUCCESS) return 0;
  return t;
}

void push_phase(const std::string& name) {
  State& s = state();
  const std::uint64_t start = now();
  const std::lock_guard<std::mutex> lock(s.mutex);
  const std::uint32_t id =
      s.intern(t_phase_stack.empty() ? name : s.phase_names[t_phase_stack.back()] + "/" + name);
  t_phase_stack.push_back(id);
  t_interval_stack.push_back(s.intervals.size());
  s.intervals.push_back({start, UINT64_MAX, id});
}

void pop_phase() {
  if (t_phase_stack.empty()) return;  // unbalanced NVTX pop in the audited program
  t_phase_stack.pop_back();
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  if (!t_interval_stack.empty()) {
    s.intervals[t_interval_stack.back()].end = now();
    t_interval_stack.pop_back();
  }
}

// ---------------------------------------------------------------------------------------------
// Unified-memory counters: only possible once a context exists.

void try_enable_unified_memory(State& s) {
  if (s.um_enabled) return;
  CUpti_ActivityUnifiedMemoryCounterConfig config[2]{};
  config[0].scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE;
  config[0].kind = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD;
  config[0].deviceId = 0;
  config[0].enable = 1;
  config[1] = config[0];
  config[1].kind = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH;
  CUptiResult result = cuptiActivityConfigureUnifiedMemoryCounter(config, 2);
  if (result == CUPTI_ERROR_NOT_READY) return;  // no context yet: try again later
  if (result == CUPTI_SUCCESS) result = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
  s.um_enabled = true;  // success or a final failure: stop trying
  if (result != CUPTI_SUCCESS) {
    const std::lock_guard<std::mutex> lock(s.mutex);
    s.notes.push_back("unified-memory counters unavailable: " + cupti_error_text(result));
  }
}

// ---------------------------------------------------------------------------------------------
// Callbacks.

bool call_succeeded(CUpti_CallbackDomain domain, const CUpti_CallbackData* data) {
  if (data->functionReturnValue == nullptr) return false;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
    return *static_cast<const cudaError_t*>(data->functionReturnValue) == cudaSuccess;
  return *static_cast<const CUresult*>(data->functionReturnValue) == CUDA_SUCCESS;
}

// Whether a successful allocation-type call made zero-copy or managed memory.
void count_allocation(State& s, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                      const ApiInfo& api, const CUpti_CallbackData* data) {
  bool mapped = false, managed = false;
  const void* params = data->functionParams;
  switch (api.kind) {
    case ApiKind::kHostAlloc:
      if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020)
        mapped = (static_cast<const cudaHostAlloc_v3020_params*>(params)->flags & cudaHostAllocMapped) != 0;
      else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc)
        mapped = (static_cast<const cuMemHostAlloc_params*>(params)->Flags & CU_MEMHOSTALLOC_DEVICEMAP) != 0;
      break;
    case ApiKind::kHostRegister:
      if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaHostRegister_v4000)
        mapped = (static_cast<const cudaHostRegister_v4000_params*>(params)->flags & cudaHostRegisterMapped) != 0;
      else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2)
        mapped = (static_cast<const cuMemHostRegister_v2_params*>(params)->Flags & CU_MEMHOSTREGISTER_DEVICEMAP) != 0;
      break;
    case ApiKind::kHostDevicePointer: mapped = true; break;
    case ApiKind::kManagedAlloc: managed = true; break;
    default: return;
  }
  if (!mapped && !managed) return;
  const std::lock_guard<std::mutex> lock(s.mutex);
  PhaseCounters& c = s.accum[current_phase_id()].counters;
  if (mapped) ++c.mapped_allocs;
  if (managed) ++c.managed_allocs;
}

void on_api(State& s, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
            const CUpti_CallbackData* data) {
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  const ApiInfo& api = runtime ? s.runtime_apis[cbid] : s.driver_apis[cbid];
  const bool nested = !runtime && t_runtime_depth > 0;  // driver call made by a runtime call
  if (data->callbackSite == CUPTI_API_EXIT) {
    if (runtime) {
      --t_runtime_depth;
      t_runtime_context.reset();
    }
    if (!nested && !t_internal && call_succeeded(domain, data)) count_allocation(s, domain, cbid, api, data);
    return;
  }
  if (runtime) ++t_runtime_depth;
  if (!s.um_enabled && s.context_created && s.options.activity && s.options.unified_memory)
    try_enable_unified_memory(s);

  switch (api.kind) {
    case ApiKind::kCopy:
    case ApiKind::kMemset:
    case ApiKind::kGraphLaunch: {
      ContextPtr ctx;
      if (nested && t_runtime_context) {
        ctx = t_runtime_context;
      } else {
        ctx = std::make_shared<CallContext>();
        ctx->phase = current_phase_id();
        ctx->api = api.name.c_str();
        ctx->blocking = api.blocking;
        ctx->internal = t_internal;
        // Copies only: a graph launch is named by its API (its stack would cost every replay).
        if (s.options.capture_d2h_stacks && api.kind == ApiKind::kCopy && !t_internal)
          ctx->stack = capture_stack();
        if (runtime) t_runtime_context = ctx;
      }
      const std::lock_guard<std::mutex> lock(s.mutex);
      s.remember(data->correlationId, ctx, api.kind == ApiKind::kGraphLaunch);
      break;
    }
    case ApiKind::kSyncDevice:
    case ApiKind::kSyncStream:
    case ApiKind::kSyncEvent: {
      if (nested || t_internal) break;
      RawStack stack;
      if (s.options.capture_sync_stacks) stack = capture_stack();
      const std::lock_guard<std::mutex> lock(s.mutex);
      PhaseAccum& acc = s.accum[current_phase_id()];
      const char* what = "device sync";
      if (api.kind == ApiKind::kSyncDevice) {
        ++acc.counters.sync_device;
      } else if (api.kind == ApiKind::kSyncStream) {
        ++acc.counters.sync_stream;
        what = "stream sync";
      } else {
        ++acc.counters.sync_event;
        what = "event sync";
      }
      if (s.options.capture_sync_stacks)
        s.add_site(acc.sync_sites, acc.sync_sites_dropped, api.name.c_str(), what, stack);
      break;
    }
    default: break;
  }
}

void on_nvtx(CUpti_CallbackId cbid, const CUpti_NvtxData* data) {
  const auto message_of = [](const nvtxEventAttributes_t* attributes) -> std::string {
    if (attributes != nullptr && attributes->messageType == NVTX_MESSAGE_TYPE_ASCII &&
        attributes->message.ascii != nullptr)
      return attributes->message.ascii;
    return "(unnamed range)";
  };
  switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxRangePushA: {
      const char* message = static_cast<const nvtxRangePushA_params*>(data->functionParams)->message;
      push_phase(message != nullptr ? message : "(unnamed range)");
      break;
    }
    case CUPTI_CBID_NVTX_nvtxRangePushEx:
      push_phase(message_of(static_cast<const nvtxRangePushEx_params*>(data->functionParams)->eventAttrib));
      break;
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx:
      push_phase(message_of(
          static_cast<const nvtxDomainRangePushEx_params*>(data->functionParams)->core.eventAttrib));
      break;
    case CUPTI_CBID_NVTX_nvtxRangePop:
    case CUPTI_CBID_NVTX_nvtxDomainRangePop:
      pop_phase();
      break;
    default: break;
  }
}

void CUPTIAPI on_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* data) {
  State& s = *static_cast<State*>(userdata);
  switch (domain) {
    case CUPTI_CB_DOMAIN_RUNTIME_API:
    case CUPTI_CB_DOMAIN_DRIVER_API:
      on_api(s, domain, cbid, static_cast<const CUpti_CallbackData*>(data));
      break;
    case CUPTI_CB_DOMAIN_RESOURCE:
      if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) s.context_created = true;
      break;
    case CUPTI_CB_DOMAIN_NVTX:
      on_nvtx(cbid, static_cast<const CUpti_NvtxData*>(data));
      break;
    default: break;
  }
}

// ---------------------------------------------------------------------------------------------
// Activity records.

bool is_device_to_host(std::uint8_t kind) {
  return kind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH || kind == CUPTI_ACTIVITY_MEMCPY_KIND_ATOH;
}
bool is_host_to_device(std::uint8_t kind) {
  return kind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD || kind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOA;
}

void consume_memcpy(State& s, const CUpti_ActivityMemcpy6& r) {
  ContextPtr ctx = s.take_context(r.correlationId);
  if (!ctx) ctx = s.take_context(r.runtimeCorrelationId);
  if (ctx && ctx->internal) return;
  if (!ctx) ++s.unmatched_records;
  const std::uint32_t phase = ctx ? ctx->phase : s.phase_at(r.start);
  PhaseAccum& acc = s.accum[phase];
  PhaseCounters& c = acc.counters;
  const std::uint64_t copies = std::max<std::uint64_t>(1, r.copyCount);
  const std::uint64_t bytes_each = r.bytes / copies;
  if (is_device_to_host(r.copyKind)) {
    const bool scalar = bytes_each <= kScalarBytes;
    (scalar ? c.d2h_scalar : c.d2h_bulk) += copies;
    (scalar ? c.d2h_scalar_bytes : c.d2h_bulk_bytes) += r.bytes;
    const bool pageable = r.dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    (pageable ? c.host_pageable : c.host_pinned) += copies;
    if ((ctx && ctx->blocking) || pageable) c.sync_implicit += copies;
    if (ctx && s.options.capture_d2h_stacks)
      s.add_site(acc.d2h_sites, acc.d2h_sites_dropped, ctx->api,
                 std::string(scalar ? "scalar d2h " : "bulk d2h ") + format_bytes(bytes_each),
                 ctx->stack);
  } else if (is_host_to_device(r.copyKind)) {
    c.h2d += copies;
    c.h2d_bytes += r.bytes;
    (r.srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE ? c.host_pageable : c.host_pinned) += copies;
    if (ctx && ctx->blocking) c.sync_implicit += copies;
  } else if (r.copyKind != CUPTI_ACTIVITY_MEMCPY_KIND_HTOH) {
    c.d2d += copies;
    c.d2d_bytes += r.bytes;
  }
}

void consume(State& s, const CUpti_Activity* record) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      consume_memcpy(s, *reinterpret_cast<const CUpti_ActivityMemcpy6*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      const auto& r = *reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
      const ContextPtr ctx = s.take_context(r.correlationId);
      if (ctx && ctx->internal) break;
      PhaseCounters& c = s.accum[ctx ? ctx->phase : s.phase_at(r.start)].counters;
      ++c.d2d;
      c.d2d_bytes += r.bytes;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto& r = *reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      const ContextPtr ctx = s.take_context(r.correlationId);
      if (ctx && ctx->internal) break;
      ++s.accum[ctx ? ctx->phase : s.phase_at(r.start)].counters.memsets;
      break;
    }
    case CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER: {
      const auto& r = *reinterpret_cast<const CUpti_ActivityUnifiedMemoryCounter3*>(record);
      PhaseCounters& c = s.accum[s.phase_at(r.start)].counters;
      if (r.counterKind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH)
        c.um_d2h_bytes += r.value;
      else if (r.counterKind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD)
        c.um_h2d_bytes += r.value;
      break;
    }
    default: break;
  }
}

constexpr std::size_t kActivityBufferBytes = std::size_t{4} << 20;

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, kActivityBufferBytes));
  *size = *buffer != nullptr ? kActivityBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer,
                               std::size_t /*size*/, std::size_t valid_size) {
  State& s = state();
  {
    const std::lock_guard<std::mutex> lock(s.mutex);
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) consume(s, record);
    std::size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS)
      s.dropped_records += dropped;
  }
  std::free(buffer);
}

constexpr CUpti_ActivityKind kActivityKinds[] = {
    CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET};

void enable_api_callbacks(State& s, CUpti_CallbackDomain domain) {
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  const std::size_t count = runtime ? std::size_t{CUPTI_RUNTIME_TRACE_CBID_SIZE}
                                    : std::size_t{CUPTI_DRIVER_TRACE_CBID_SIZE};
  for (std::size_t cbid = 1; cbid < count; ++cbid) {
    const char* name = nullptr;
    if (cuptiGetCallbackName(domain, static_cast<std::uint32_t>(cbid), &name) != CUPTI_SUCCESS ||
        name == nullptr)
      continue;
    const ApiInfo info = runtime ? classify_runtime(name) : classify_driver(name);
    if (info.kind == ApiKind::kUntraced) continue;
    if (runtime)
      s.runtime_apis[cbid] = info;
    else
      s.driver_apis[cbid] = info;
    AUDIT_CUPTI_CHECK(cuptiEnableCallback(1, s.subscriber, domain, static_cast<CUpti_CallbackId>(cbid)));
  }
}

class InternalScope {
 public:
  InternalScope() : previous_(t_internal) { t_internal = true; }
  ~InternalScope() { t_internal = previous_; }

 private:
  bool previous_;
};

void flush() {
  (void)cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

AuditReport build_report(State& s) {
  const std::lock_guard<std::mutex> lock(s.mutex);
  AuditReport report;
  for (std::size_t id = 0; id < s.phase_names.size(); ++id) {
    const PhaseAccum& acc = s.accum[id];
    if (id == kUnscoped && acc.counters == PhaseCounters{}) continue;
    PhaseReport p;
    p.phase = s.phase_names[id];
    p.counters = acc.counters;
    for (const SiteAccum& site : acc.d2h_sites) {
      p.d2h_sites.push_back(site.site);
      p.d2h_sites.back().frames = symbolize(site.stack);
    }
    for (const SiteAccum& site : acc.sync_sites) {
      p.sync_sites.push_back(site.site);
      p.sync_sites.back().frames = symbolize(site.stack);
    }
    if (acc.d2h_sites_dropped > 0 || acc.sync_sites_dropped > 0)
      report.notes.push_back(p.phase + ": " + std::to_string(acc.d2h_sites_dropped + acc.sync_sites_dropped) +
                             " records from further call sites not itemized (max_sites_per_phase)");
    report.phases.push_back(std::move(p));
  }
  report.notes.insert(report.notes.end(), s.notes.begin(), s.notes.end());
  if (s.dropped_records > 0)
    report.notes.push_back("CUPTI dropped " + std::to_string(s.dropped_records) +
                           " activity records: counts are lower bounds");
  if (s.unmatched_records > 0)
    report.notes.push_back(std::to_string(s.unmatched_records) +
                           " copies matched no traced API call; attributed by timestamp");
  return report;
}

}  // namespace

// -------------------------------------------------------------------------------------------------

Tracer& Tracer::instance() {
  static Tracer tracer;
  return tracer;
}

void Tracer::start(const TracerOptions& options) {
  State& s = state();
  if (s.running) return;
  if (KernelTimeline::any_running())
    throw AuditError("audit: Tracer::start: a KernelTimeline is running; CUPTI's activity buffer "
                     "callbacks are one per process, so stop the timeline first");
  s.options = options;
  if (options.api_callbacks || options.follow_nvtx) {
    const CUptiResult subscribed = cuptiSubscribe(&s.subscriber, on_callback, &s);
    if (subscribed == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
      throw AuditError(
          "audit: another CUPTI subscriber is active in this process (resident-audit's injection, "
          "Nsight Systems or Compute?); run without it to use the in-process tracer");
    check_cupti(subscribed, "cuptiSubscribe", __FILE__, __LINE__);
    AUDIT_CUPTI_CHECK(cuptiEnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                          CUPTI_CBID_RESOURCE_CONTEXT_CREATED));
  }
  if (options.api_callbacks) {
    enable_api_callbacks(s, CUPTI_CB_DOMAIN_RUNTIME_API);
    enable_api_callbacks(s, CUPTI_CB_DOMAIN_DRIVER_API);
  }
  if (options.follow_nvtx) AUDIT_CUPTI_CHECK(cuptiEnableDomain(1, s.subscriber, CUPTI_CB_DOMAIN_NVTX));
  AUDIT_CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  if (options.activity)
    for (const CUpti_ActivityKind kind : kActivityKinds) AUDIT_CUPTI_CHECK(cuptiActivityEnable(kind));
  s.running = true;
  if (!options.follow_nvtx) {
    // In-process: make sure a context exists, then enable the unified-memory counters.
    const InternalScope internal;
    if (cudaFree(nullptr) == cudaSuccess) {
      s.context_created = true;
      if (options.activity && options.unified_memory) try_enable_unified_memory(s);
    } else {
      (void)cudaGetLastError();
    }
  }
}

void Tracer::stop() {
  State& s = state();
  if (!s.running) return;
  flush();
  for (const CUpti_ActivityKind kind : kActivityKinds) (void)cuptiActivityDisable(kind);
  if (s.um_enabled) (void)cuptiActivityDisable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
  if (s.subscriber != nullptr) (void)cuptiUnsubscribe(s.subscriber);
  s.subscriber = nullptr;
  s.runtime_apis.fill(ApiInfo{});
  s.driver_apis.fill(ApiInfo{});
  s.running = false;
  s.um_enabled = false;
}

bool Tracer::running() const { return state().running; }

std::size_t Tracer::pending_calls() const {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  return s.pending.size();
}

TracerOptions Tracer::options() const { return state().options; }

AuditReport Tracer::snapshot() {
  {
    const InternalScope internal;
    if (cudaDeviceSynchronize() != cudaSuccess) (void)cudaGetLastError();
  }
  return snapshot_without_sync();
}

AuditReport Tracer::snapshot_without_sync() {
  flush();
  return build_report(state());
}

void Tracer::reset() {
  (void)snapshot();
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  for (PhaseAccum& acc : s.accum) acc = PhaseAccum{};
  s.notes.erase(std::remove_if(s.notes.begin(), s.notes.end(),
                               [](const std::string& n) { return n.rfind("unified-memory", 0) != 0; }),
                s.notes.end());
  s.pending.clear();
  s.pending_graph_launches.clear();
  s.pending_transfers.clear();
  s.recent.clear();
  s.recent_next = 0;
  s.unmatched_records = 0;
  s.dropped_records = 0;
}

Phase::Phase(std::string_view name) {
  push_phase(std::string(name));
  nvtxRangePushA(std::string(name).c_str());
}

Phase::~Phase() {
  nvtxRangePop();
  pop_phase();
}

std::string current_phase() {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  return s.phase_names[current_phase_id()];
}

}  // namespace resident::audit
