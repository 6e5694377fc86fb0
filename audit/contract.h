// TransferContract: what a phase may move between host and device. check_contracts() returns
// readable violations such as
//   dqn/epoch: 3 bulk D2H (12.0 MiB), contract 0; first: cudaMemcpyAsync from resident::Foo::bar
//
// Contract file (JSON):
//   {"contracts": [
//     {"phase": "dqn/epoch", "max_d2h_scalar": 2, "max_d2h_bulk": 0, "max_h2d": 0,
//      "max_syncs": 1, "allow_mapped": false},
//     {"phase": "*", "max_d2h_bulk": 0}]}
// A missing or null limit means unlimited; allow_mapped defaults to false. "phase" may use '*'
// as a wildcard; each phase is checked against the first exact match, else the first
// wildcard match, in file order. Phases that match no contract are not checked.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "audit/json.h"
#include "audit/report.h"

namespace resident::audit {

struct TransferContract {
  std::string phase;
  std::optional<std::uint64_t> max_d2h_scalar;
  std::optional<std::uint64_t> max_d2h_bulk;
  std::optional<std::uint64_t> max_h2d;
  std::optional<std::uint64_t> max_syncs;
  bool allow_mapped = false;  // mapped (zero-copy) or managed allocations
  bool operator==(const TransferContract&) const = default;
};

struct Violation {
  std::string phase;
  std::string limit;  // "max_d2h_bulk", ...
  std::uint64_t measured = 0;
  std::uint64_t allowed = 0;
  std::string message;
};

bool phase_matches(const std::string& pattern, const std::string& phase);
const TransferContract* contract_for(const std::vector<TransferContract>& contracts,
                                     const std::string& phase);

std::vector<Violation> check_contracts(const AuditReport& report,
                                       const std::vector<TransferContract>& contracts);
// One violation message per line; empty when there are none.
std::string format_violations(const std::vector<Violation>& violations);

// Throws std::runtime_error naming the field (and, for load_contracts, the file).
std::vector<TransferContract> contracts_from_json(const Json& json);
Json to_json(const std::vector<TransferContract>& contracts);
std::vector<TransferContract> load_contracts(const std::string& path);

}  // namespace resident::audit
