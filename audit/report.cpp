#include "audit/report.h"

#include <cstdio>
#include <stdexcept>
#include <utility>

namespace resident::audit {

namespace {

// Every counter with its JSON name, in table order.
struct CounterField {
  const char* name;
  std::uint64_t PhaseCounters::*member;
};
constexpr CounterField kCounterFields[] = {
    {"d2h_scalar", &PhaseCounters::d2h_scalar},
    {"d2h_scalar_bytes", &PhaseCounters::d2h_scalar_bytes},
    {"d2h_bulk", &PhaseCounters::d2h_bulk},
    {"d2h_bulk_bytes", &PhaseCounters::d2h_bulk_bytes},
    {"h2d", &PhaseCounters::h2d},
    {"h2d_bytes", &PhaseCounters::h2d_bytes},
    {"d2d", &PhaseCounters::d2d},
    {"d2d_bytes", &PhaseCounters::d2d_bytes},
    {"memsets", &PhaseCounters::memsets},
    {"host_pageable", &PhaseCounters::host_pageable},
    {"host_pinned", &PhaseCounters::host_pinned},
    {"sync_device", &PhaseCounters::sync_device},
    {"sync_stream", &PhaseCounters::sync_stream},
    {"sync_event", &PhaseCounters::sync_event},
    {"sync_implicit", &PhaseCounters::sync_implicit},
    {"um_d2h_bytes", &PhaseCounters::um_d2h_bytes},
    {"um_h2d_bytes", &PhaseCounters::um_h2d_bytes},
    {"mapped_allocs", &PhaseCounters::mapped_allocs},
    {"managed_allocs", &PhaseCounters::managed_allocs},
};

const Json& require(const Json& object, const std::string& key, const std::string& where) {
  const Json* value = object.find(key);
  if (value == nullptr) throw std::runtime_error(where + ": missing field \"" + key + "\"");
  return *value;
}

std::string require_string(const Json& object, const std::string& key, const std::string& where) {
  const Json& value = require(object, key, where);
  if (!value.is_string()) throw std::runtime_error(where + "." + key + ": expected a string");
  return value.as_string();
}

std::uint64_t require_count(const Json& object, const std::string& key, const std::string& where) {
  const Json& value = require(object, key, where);
  if (!value.is_number() || value.as_number() < 0)
    throw std::runtime_error(where + "." + key + ": expected a non-negative number");
  return static_cast<std::uint64_t>(value.as_number());
}

const Json::Array& require_array(const Json& object, const std::string& key,
                                 const std::string& where) {
  const Json& value = require(object, key, where);
  if (!value.is_array()) throw std::runtime_error(where + "." + key + ": expected an array");
  return value.as_array();
}

Json site_to_json(const CallSite& site) {
  Json::Array frames;
  for (const StackFrame& f : site.frames)
    frames.push_back(Json::Object{{"function", f.function}, {"object", f.object},
                                  {"location", f.location}});
  return Json::Object{{"api", site.api}, {"what", site.what}, {"count", site.count},
                      {"frames", std::move(frames)}};
}

CallSite site_from_json(const Json& json, const std::string& where) {
  CallSite site;
  site.api = require_string(json, "api", where);
  site.what = require_string(json, "what", where);
  site.count = require_count(json, "count", where);
  const Json::Array& frames = require_array(json, "frames", where);
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const std::string fwhere = where + ".frames[" + std::to_string(i) + "]";
    site.frames.push_back({require_string(frames[i], "function", fwhere),
                           require_string(frames[i], "object", fwhere),
                           require_string(frames[i], "location", fwhere)});
  }
  return site;
}

std::vector<CallSite> sites_from_json(const Json& phase, const std::string& key,
                                      const std::string& where) {
  std::vector<CallSite> sites;
  const Json::Array& array = require_array(phase, key, where);
  for (std::size_t i = 0; i < array.size(); ++i)
    sites.push_back(site_from_json(array[i], where + "." + key + "[" + std::to_string(i) + "]"));
  return sites;
}

}  // namespace

PhaseCounters& PhaseCounters::operator+=(const PhaseCounters& other) {
  for (const CounterField& field : kCounterFields) this->*field.member += other.*field.member;
  return *this;
}

std::string CallSite::describe() const {
  std::string text = api;
  if (!frames.empty()) {
    text += " from " + frames.front().function;
    if (!frames.front().location.empty()) text += " (" + frames.front().location + ")";
  }
  return text;
}

const PhaseReport* AuditReport::find(const std::string& phase) const {
  for (const PhaseReport& p : phases)
    if (p.phase == phase) return &p;
  return nullptr;
}

PhaseCounters AuditReport::total() const {
  PhaseCounters sum;
  for (const PhaseReport& p : phases) sum += p.counters;
  return sum;
}

std::string format_bytes(std::uint64_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else if (bytes < (1ull << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  } else if (bytes < (1ull << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024.0));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
  }
  return buf;
}

Json to_json(const AuditReport& report) {
  Json::Array phases;
  for (const PhaseReport& p : report.phases) {
    Json::Object counters;
    for (const CounterField& field : kCounterFields) counters[field.name] = p.counters.*field.member;
    Json::Array d2h_sites, sync_sites;
    for (const CallSite& s : p.d2h_sites) d2h_sites.push_back(site_to_json(s));
    for (const CallSite& s : p.sync_sites) sync_sites.push_back(site_to_json(s));
    phases.push_back(Json::Object{{"phase", p.phase},
                                  {"counters", std::move(counters)},
                                  {"d2h_sites", std::move(d2h_sites)},
                                  {"sync_sites", std::move(sync_sites)}});
  }
  Json::Array notes;
  for (const std::string& n : report.notes) notes.push_back(n);
  return Json::Object{{"format", "resident-audit-report/1"},
                      {"phases", std::move(phases)},
                      {"notes", std::move(notes)}};
}

AuditReport report_from_json(const Json& json) {
  if (!json.is_object()) throw std::runtime_error("report: expected a JSON object");
  const std::string format = require_string(json, "format", "report");
  if (format != "resident-audit-report/1")
    throw std::runtime_error("report.format: unknown format \"" + format + "\"");
  AuditReport report;
  const Json::Array& phases = require_array(json, "phases", "report");
  for (std::size_t i = 0; i < phases.size(); ++i) {
    const std::string where = "report.phases[" + std::to_string(i) + "]";
    PhaseReport p;
    p.phase = require_string(phases[i], "phase", where);
    const Json& counters = require(phases[i], "counters", where);
    for (const CounterField& field : kCounterFields)
      p.counters.*field.member = require_count(counters, field.name, where + ".counters");
    p.d2h_sites = sites_from_json(phases[i], "d2h_sites", where);
    p.sync_sites = sites_from_json(phases[i], "sync_sites", where);
    report.phases.push_back(std::move(p));
  }
  const Json::Array& notes = require_array(json, "notes", "report");
  for (std::size_t i = 0; i < notes.size(); ++i) {
    if (!notes[i].is_string())
      throw std::runtime_error("report.notes[" + std::to_string(i) + "]: expected a string");
    report.notes.push_back(notes[i].as_string());
  }
  return report;
}

std::string format_table(const AuditReport& report) {
  std::size_t width = 5;
  for (const PhaseReport& p : report.phases) width = std::max(width, p.phase.size());
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-*s %6s %6s %11s %6s %11s %6s %6s %6s %6s %6s %6s %10s %6s\n",
                static_cast<int>(width), "phase", "d2h<=8", "d2h>8", "d2h bytes", "h2d",
                "h2d bytes", "d2d", "memset", "s.dev", "s.strm", "s.evt", "s.impl", "UM d2h",
                "mapped");
  out += line;
  for (const PhaseReport& p : report.phases) {
    const PhaseCounters& c = p.counters;
    std::snprintf(line, sizeof line,
                  "%-*s %6llu %6llu %11s %6llu %11s %6llu %6llu %6llu %6llu %6llu %6llu %10s %6llu\n",
                  static_cast<int>(width), p.phase.c_str(),
                  static_cast<unsigned long long>(c.d2h_scalar),
                  static_cast<unsigned long long>(c.d2h_bulk),
                  format_bytes(c.d2h_scalar_bytes + c.d2h_bulk_bytes).c_str(),
                  static_cast<unsigned long long>(c.h2d), format_bytes(c.h2d_bytes).c_str(),
                  static_cast<unsigned long long>(c.d2d), static_cast<unsigned long long>(c.memsets),
                  static_cast<unsigned long long>(c.sync_device),
                  static_cast<unsigned long long>(c.sync_stream),
                  static_cast<unsigned long long>(c.sync_event),
                  static_cast<unsigned long long>(c.sync_implicit),
                  format_bytes(c.um_d2h_bytes).c_str(),
                  static_cast<unsigned long long>(c.mapped_allocs + c.managed_allocs));
    out += line;
  }
  for (const std::string& note : report.notes) out += "note: " + note + "\n";
  return out;
}

}  // namespace resident::audit
