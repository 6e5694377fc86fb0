// The injection library: CUDA loads it into any program through CUDA_INJECTION64_PATH and calls
// InitializeInjection() when the program first initializes CUDA. Phases are the program's NVTX
// ranges (CUPTI receives them when NVTX_INJECTION64_PATH names libcupti; resident-audit sets
// both). At exit the report is written as JSON to $RESIDENT_AUDIT_OUT, or printed as a table
// on stderr when that is unset. So that resident-audit can tell what happened, the file holds
// nothing while CUDA has not loaded this library, {"started": true} from the tracer's start
// until the exit report replaces it (a program killed or ended by _exit keeps that), and
// {"error": "..."} when the tracer could not start.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "audit/tracer.h"

namespace {

// Writes TEXT to $RESIDENT_AUDIT_OUT when set; false when it is unset.
bool write_out(const std::string& text) {
  const char* out = std::getenv("RESIDENT_AUDIT_OUT");
  if (out == nullptr || out[0] == '\0') return false;
  std::ofstream file(out);
  file << text << "\n";
  if (!file) std::fprintf(stderr, "resident-audit: cannot write %s\n", out);
  return true;
}

void write_report_at_exit() {
  try {
    using resident::audit::Tracer;
    const resident::audit::AuditReport report = Tracer::instance().snapshot_without_sync();
    if (!write_out(resident::audit::to_json(report).dump()))
      std::fprintf(stderr, "%s", resident::audit::format_table(report).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resident-audit: %s\n", e.what());
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  try {
    resident::audit::TracerOptions options;
    options.follow_nvtx = true;
    const char* sync_stacks = std::getenv("RESIDENT_AUDIT_SYNC_STACKS");
    options.capture_sync_stacks = sync_stacks != nullptr && sync_stacks[0] == '1';
    resident::audit::Tracer::instance().start(options);
    std::atexit(write_report_at_exit);
    write_out(resident::audit::Json(resident::audit::Json::Object{{"started", true}}).dump());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resident-audit: %s\n", e.what());
    write_out(resident::audit::Json(resident::audit::Json::Object{{"error", e.what()}}).dump());
    return 0;
  }
}
