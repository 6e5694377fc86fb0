// GoogleTest helper: assert that an audit report keeps its transfer contracts.
//   RESIDENT_EXPECT_WITHIN_CONTRACT(report, contracts);
// On failure it prints each violation (phase, counts, bytes, first call site) and the table.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "audit/contract.h"
#include "audit/report.h"

namespace resident::audit {

inline ::testing::AssertionResult within_contract(const AuditReport& report,
                                                  const std::vector<TransferContract>& contracts) {
  const std::vector<Violation> violations = check_contracts(report, contracts);
  if (violations.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "transfer contract violated:\n"
                                       << format_violations(violations) << format_table(report);
}

}  // namespace resident::audit

#define RESIDENT_EXPECT_WITHIN_CONTRACT(report, contracts) \
  EXPECT_TRUE(::resident::audit::within_contract((report), (contracts)))
#define RESIDENT_ASSERT_WITHIN_CONTRACT(report, contracts) \
  ASSERT_TRUE(::resident::audit::within_contract((report), (contracts)))
