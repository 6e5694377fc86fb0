#include "audit/contract.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace resident::audit {

namespace {

// "; first: <site>" for the first site whose description starts with `kind` ("scalar d2h",
// "bulk d2h", "" for any), or nothing when no site was recorded.
std::string first_site(const std::vector<CallSite>& sites, const std::string& kind = "") {
  for (const CallSite& site : sites)
    if (site.what.rfind(kind, 0) == 0) return "; first: " + site.describe();
  return "";
}

std::string count_noun(std::uint64_t n, const char* singular, const char* plural) {
  return std::to_string(n) + " " + (n == 1 ? singular : plural);
}

std::string sync_breakdown(const PhaseCounters& c) {
  std::string parts;
  const auto add = [&](std::uint64_t n, const char* kind) {
    if (n == 0) return;
    if (!parts.empty()) parts += ", ";
    parts += std::to_string(n) + " " + kind;
  };
  add(c.sync_device, "device");
  add(c.sync_stream, "stream");
  add(c.sync_event, "event");
  add(c.sync_implicit, "implicit");
  return parts;
}

void check_limit(std::vector<Violation>& out, const PhaseReport& p, const char* limit,
                 std::optional<std::uint64_t> allowed, std::uint64_t measured,
                 const std::string& what, const std::string& site) {
  if (!allowed || measured <= *allowed) return;
  Violation v;
  v.phase = p.phase;
  v.limit = limit;
  v.measured = measured;
  v.allowed = *allowed;
  v.message = p.phase + ": " + what + ", contract " + std::to_string(*allowed) + site;
  out.push_back(std::move(v));
}

const char* const kContractFields[] = {"phase",     "max_d2h_scalar", "max_d2h_bulk",
                                       "max_h2d",   "max_syncs",      "allow_mapped"};

std::optional<std::uint64_t> optional_limit(const Json& entry, const char* key,
                                            const std::string& where) {
  const Json* value = entry.find(key);
  if (value == nullptr || value->is_null()) return std::nullopt;
  if (!value->is_number() || value->as_number() < 0 ||
      value->as_number() != static_cast<double>(static_cast<std::uint64_t>(value->as_number())))
    throw std::runtime_error(where + "." + key + ": expected a non-negative integer or null");
  return static_cast<std::uint64_t>(value->as_number());
}

}  // namespace

bool phase_matches(const std::string& pattern, const std::string& phase) {
  // Iterative wildcard match: '*' matches any run of characters (including '/').
  std::size_t p = 0, s = 0, star = std::string::npos, mark = 0;
  while (s < phase.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = s;
    } else if (p < pattern.size() && pattern[p] == phase[s]) {
      ++p;
      ++s;
    } else if (star != std::string::npos) {
      p = star + 1;
      s = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

const TransferContract* contract_for(const std::vector<TransferContract>& contracts,
                                     const std::string& phase) {
  for (const TransferContract& c : contracts)
    if (c.phase == phase) return &c;
  for (const TransferContract& c : contracts)
    if (c.phase.find('*') != std::string::npos && phase_matches(c.phase, phase)) return &c;
  return nullptr;
}

std::vector<Violation> check_contracts(const AuditReport& report,
                                       const std::vector<TransferContract>& contracts) {
  std::vector<Violation> out;
  for (const PhaseReport& p : report.phases) {
    const TransferContract* c = contract_for(contracts, p.phase);
    if (c == nullptr) continue;
    const PhaseCounters& n = p.counters;
    check_limit(out, p, "max_d2h_scalar", c->max_d2h_scalar, n.d2h_scalar,
                count_noun(n.d2h_scalar, "scalar D2H", "scalar D2H") + " (" +
                    format_bytes(n.d2h_scalar_bytes) + ")",
                first_site(p.d2h_sites, "scalar d2h"));
    check_limit(out, p, "max_d2h_bulk", c->max_d2h_bulk, n.d2h_bulk,
                count_noun(n.d2h_bulk, "bulk D2H", "bulk D2H") + " (" +
                    format_bytes(n.d2h_bulk_bytes) + ")",
                first_site(p.d2h_sites, "bulk d2h"));
    check_limit(out, p, "max_h2d", c->max_h2d, n.h2d,
                count_noun(n.h2d, "H2D", "H2D") + " (" + format_bytes(n.h2d_bytes) + ")", "");
    check_limit(out, p, "max_syncs", c->max_syncs, n.syncs(),
                count_noun(n.syncs(), "sync", "syncs") + " (" + sync_breakdown(n) + ")",
                first_site(p.sync_sites));
    const std::uint64_t zero_copy = n.mapped_allocs + n.managed_allocs;
    if (!c->allow_mapped && zero_copy > 0) {
      Violation v;
      v.phase = p.phase;
      v.limit = "allow_mapped";
      v.measured = zero_copy;
      v.allowed = 0;
      v.message = p.phase + ": " +
                  count_noun(zero_copy, "mapped/managed allocation", "mapped/managed allocations") +
                  ", contract forbids them (CUPTI cannot see traffic through them)";
      out.push_back(std::move(v));
    }
  }
  return out;
}

std::string format_violations(const std::vector<Violation>& violations) {
  std::string out;
  for (const Violation& v : violations) out += v.message + "\n";
  return out;
}

std::vector<TransferContract> contracts_from_json(const Json& json) {
  const Json* list = json.find("contracts");
  if (list == nullptr) throw std::runtime_error("missing field \"contracts\"");
  if (!list->is_array()) throw std::runtime_error("contracts: expected an array");
  std::vector<TransferContract> contracts;
  for (std::size_t i = 0; i < list->as_array().size(); ++i) {
    const Json& entry = list->as_array()[i];
    const std::string where = "contracts[" + std::to_string(i) + "]";
    if (!entry.is_object()) throw std::runtime_error(where + ": expected an object");
    for (const auto& [key, value] : entry.as_object()) {
      bool known = false;
      for (const char* field : kContractFields) known = known || key == field;
      if (!known) throw std::runtime_error(where + ": unknown field \"" + key + "\"");
    }
    TransferContract c;
    const Json* phase = entry.find("phase");
    if (phase == nullptr || !phase->is_string() || phase->as_string().empty())
      throw std::runtime_error(where + ".phase: expected a non-empty string");
    c.phase = phase->as_string();
    c.max_d2h_scalar = optional_limit(entry, "max_d2h_scalar", where);
    c.max_d2h_bulk = optional_limit(entry, "max_d2h_bulk", where);
    c.max_h2d = optional_limit(entry, "max_h2d", where);
    c.max_syncs = optional_limit(entry, "max_syncs", where);
    if (const Json* mapped = entry.find("allow_mapped")) {
      if (!mapped->is_bool()) throw std::runtime_error(where + ".allow_mapped: expected true or false");
      c.allow_mapped = mapped->as_bool();
    }
    contracts.push_back(std::move(c));
  }
  return contracts;
}

Json to_json(const std::vector<TransferContract>& contracts) {
  Json::Array list;
  for (const TransferContract& c : contracts) {
    const auto limit = [](const std::optional<std::uint64_t>& v) {
      return v ? Json(static_cast<unsigned long long>(*v)) : Json();
    };
    list.push_back(Json::Object{{"phase", c.phase},
                                {"max_d2h_scalar", limit(c.max_d2h_scalar)},
                                {"max_d2h_bulk", limit(c.max_d2h_bulk)},
                                {"max_h2d", limit(c.max_h2d)},
                                {"max_syncs", limit(c.max_syncs)},
                                {"allow_mapped", c.allow_mapped}});
  }
  return Json::Object{{"contracts", std::move(list)}};
}

std::vector<TransferContract> load_contracts(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open contract file");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return contracts_from_json(Json::parse(text.str()));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace resident::audit
