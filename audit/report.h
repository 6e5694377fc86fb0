// What the audit measured: counters per phase, and where the device-to-host copies (and,
// on request, the synchronizations) were issued from. Plain data: built by the Tracer,
// read by contracts, tables, JSON and the GoogleTest helper.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "audit/json.h"

namespace resident::audit {

// Copies of at most this many bytes device-to-host count as scalar readbacks.
inline constexpr std::uint64_t kScalarBytes = 8;

struct PhaseCounters {
  std::uint64_t d2h_scalar = 0;        // device->host copies of <= 8 bytes
  std::uint64_t d2h_scalar_bytes = 0;
  std::uint64_t d2h_bulk = 0;          // device->host copies of > 8 bytes
  std::uint64_t d2h_bulk_bytes = 0;
  std::uint64_t h2d = 0;
  std::uint64_t h2d_bytes = 0;
  std::uint64_t d2d = 0;               // device->device and peer copies
  std::uint64_t d2d_bytes = 0;
  std::uint64_t memsets = 0;
  std::uint64_t host_pageable = 0;     // host<->device copies whose host side is pageable
  std::uint64_t host_pinned = 0;       // ... page-locked
  std::uint64_t sync_device = 0;       // cudaDeviceSynchronize / cuCtxSynchronize
  std::uint64_t sync_stream = 0;       // cudaStreamSynchronize / cuStreamSynchronize
  std::uint64_t sync_event = 0;        // cudaEventSynchronize / cuEventSynchronize
  std::uint64_t sync_implicit = 0;     // blocking copies (see tracer.h)
  std::uint64_t um_d2h_bytes = 0;      // unified-memory migrations device->host
  std::uint64_t um_h2d_bytes = 0;
  std::uint64_t mapped_allocs = 0;     // zero-copy host allocations/registrations/pointer queries
  std::uint64_t managed_allocs = 0;    // cudaMallocManaged / cuMemAllocManaged

  std::uint64_t d2h() const { return d2h_scalar + d2h_bulk; }
  std::uint64_t syncs() const { return sync_device + sync_stream + sync_event + sync_implicit; }
  PhaseCounters& operator+=(const PhaseCounters& other);
  bool operator==(const PhaseCounters&) const = default;
};

struct StackFrame {
  std::string function;   // demangled; "??" when unknown
  std::string object;     // shared object or executable
  std::string location;   // "file:line" where debug info exists, else empty
  bool operator==(const StackFrame&) const = default;
};

struct CallSite {
  std::string api;                 // e.g. "cudaMemcpyAsync"
  std::string what;                // "d2h 4.0 KiB", "stream sync", ...
  std::uint64_t count = 0;         // how many records share this site and api
  std::vector<StackFrame> frames;  // innermost first, CUDA libraries and the audit removed
  bool operator==(const CallSite&) const = default;
  // "cudaMemcpyAsync from resident::Foo::bar (lib/foo.cpp:12)"
  std::string describe() const;
};

struct PhaseReport {
  std::string phase;  // "dqn/epoch"; "(unscoped)" outside any phase
  PhaseCounters counters;
  std::vector<CallSite> d2h_sites;   // in order of first occurrence
  std::vector<CallSite> sync_sites;  // only with TracerOptions::capture_sync_stacks
  bool operator==(const PhaseReport&) const = default;
};

struct AuditReport {
  std::vector<PhaseReport> phases;  // in order of first use
  std::vector<std::string> notes;   // e.g. "unified-memory counters unavailable: ..."

  const PhaseReport* find(const std::string& phase) const;
  PhaseCounters total() const;
  bool operator==(const AuditReport&) const = default;
};

inline constexpr const char* kUnscopedPhase = "(unscoped)";

// "12.0 MiB", "8 B"
std::string format_bytes(std::uint64_t bytes);

Json to_json(const AuditReport& report);
// Throws std::runtime_error naming the missing or mistyped field.
AuditReport report_from_json(const Json& json);

// A fixed-width table, one row per phase: d2h scalar/bulk (bytes), h2d (bytes), d2d,
// memset, syncs by kind, UM bytes, mapped/managed.
std::string format_table(const AuditReport& report);

}  // namespace resident::audit
