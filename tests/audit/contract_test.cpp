// Contracts without a GPU: parsing (with errors naming the field), matching, checking, the
// violation messages, and the report's JSON round trip.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "audit/contract.h"
#include "audit/testing.h"

namespace {

using namespace resident::audit;

AuditReport sample_report() {
  AuditReport report;
  PhaseReport epoch;
  epoch.phase = "dqn/epoch";
  epoch.counters.d2h_bulk = 3;
  epoch.counters.d2h_bulk_bytes = 12ull << 20;
  epoch.counters.d2h_scalar = 1;
  epoch.counters.d2h_scalar_bytes = 4;
  epoch.counters.sync_stream = 2;
  epoch.counters.sync_implicit = 3;
  CallSite site;
  site.api = "cudaMemcpyAsync";
  site.what = "bulk d2h 4.0 MiB";
  site.count = 3;
  site.frames = {{"resident::DqnTrainer::train_step()", "libresident.so", "lib/rl/dqn.cpp:212"},
                 {"main", "dqn", ""}};
  CallSite scalar_site;  // recorded first, but not the site of the bulk violation
  scalar_site.api = "cudaMemcpyAsync";
  scalar_site.what = "scalar d2h 4 B";
  scalar_site.count = 1;
  scalar_site.frames = {{"resident::ScalarReadback<float>::enqueue()", "libresident.so", ""}};
  epoch.d2h_sites.push_back(scalar_site);
  epoch.d2h_sites.push_back(site);
  PhaseReport setup;
  setup.phase = "dqn/setup";
  setup.counters.h2d = 5;
  setup.counters.h2d_bytes = 5000;
  setup.counters.mapped_allocs = 1;
  report.phases = {setup, epoch};
  report.notes = {"a note"};
  return report;
}

TEST(AuditContract, ParsesLimitsAndRejectsBadFieldsByName) {
  const auto contracts = contracts_from_json(Json::parse(R"({"contracts": [
      {"phase": "dqn/epoch", "max_d2h_scalar": 2, "max_d2h_bulk": 0, "max_h2d": 0,
       "max_syncs": 1, "allow_mapped": false},
      {"phase": "*", "max_d2h_bulk": null}]})"));
  ASSERT_EQ(contracts.size(), 2u);
  EXPECT_EQ(contracts[0].max_d2h_scalar, 2u);
  EXPECT_EQ(contracts[0].max_d2h_bulk, 0u);
  EXPECT_EQ(contracts[0].max_syncs, 1u);
  EXPECT_FALSE(contracts[1].max_d2h_bulk.has_value());
  EXPECT_EQ(contracts_from_json(to_json(contracts)), contracts);

  const auto error_of = [](const char* text) -> std::string {
    try {
      contracts_from_json(Json::parse(text));
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error_of(R"({"contracts": [{"phase": "x", "max_h2d": -1}]})"),
            "contracts[0].max_h2d: expected a non-negative integer or null");
  EXPECT_EQ(error_of(R"({"contracts": [{"phase": "x", "max_d2h": 1}]})"),
            "contracts[0]: unknown field \"max_d2h\"");
  EXPECT_EQ(error_of(R"({"contracts": [{"max_h2d": 1}]})"),
            "contracts[0].phase: expected a non-empty string");
  EXPECT_EQ(error_of(R"({"contract": []})"), "missing field \"contracts\"");
  EXPECT_EQ(error_of(R"({"contracts": [{"phase": "x", "allow_mapped": 1}]})"),
            "contracts[0].allow_mapped: expected true or false");
}

TEST(AuditContract, WildcardsAndPrecedence) {
  EXPECT_TRUE(phase_matches("*", "a/b"));
  EXPECT_TRUE(phase_matches("*/epoch", "dqn/epoch"));
  EXPECT_FALSE(phase_matches("*/epoch", "dqn/epoch/x"));
  EXPECT_TRUE(phase_matches("dqn/*", "dqn/epoch/x"));
  EXPECT_FALSE(phase_matches("dqn", "dqn/epoch"));
  const std::vector<TransferContract> contracts = {{.phase = "*", .max_h2d = 7},
                                                   {.phase = "dqn/epoch", .max_h2d = 1}};
  EXPECT_EQ(contract_for(contracts, "dqn/epoch")->max_h2d, 1u);  // exact beats wildcard
  EXPECT_EQ(contract_for(contracts, "ppo/epoch")->max_h2d, 7u);
  EXPECT_EQ(contract_for({{.phase = "dqn/*"}}, "ppo/epoch"), nullptr);
}

TEST(AuditContract, ViolationMessagesNameCountsBytesAndCallSite) {
  const std::vector<TransferContract> contracts = {
      {.phase = "dqn/epoch", .max_d2h_scalar = 2, .max_d2h_bulk = 0, .max_h2d = 0, .max_syncs = 1},
      {.phase = "dqn/setup"}};
  const auto violations = check_contracts(sample_report(), contracts);
  ASSERT_EQ(violations.size(), 3u) << format_violations(violations);
  EXPECT_EQ(violations[0].message,
            "dqn/setup: 1 mapped/managed allocation, contract forbids them (CUPTI cannot see "
            "traffic through them)");
  EXPECT_EQ(violations[1].message,
            "dqn/epoch: 3 bulk D2H (12.0 MiB), contract 0; first: cudaMemcpyAsync from "
            "resident::DqnTrainer::train_step() (lib/rl/dqn.cpp:212)");
  EXPECT_EQ(violations[1].measured, 3u);
  EXPECT_EQ(violations[1].allowed, 0u);
  EXPECT_EQ(violations[2].message, "dqn/epoch: 5 syncs (2 stream, 3 implicit), contract 1");

  // Within limits: nothing to report, and the gtest helper agrees both ways.
  const std::vector<TransferContract> loose = {{.phase = "dqn/*", .allow_mapped = true}};
  EXPECT_TRUE(check_contracts(sample_report(), loose).empty());
  EXPECT_TRUE(within_contract(sample_report(), loose));
  EXPECT_FALSE(within_contract(sample_report(), contracts));
}

TEST(AuditContract, LoadContractsNamesTheFile) {
  const std::string path = ::testing::TempDir() + "contract_bad.json";
  std::ofstream(path) << "{\"contracts\": [{\"phase\": 3}]}";
  try {
    load_contracts(path);
    FAIL() << "loaded a bad contract";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": contracts[0].phase: expected a non-empty string");
  }
  std::remove(path.c_str());
  EXPECT_THROW(load_contracts(path), std::runtime_error);  // now missing
}

TEST(AuditReportJson, RoundTripsAndNamesMissingFields) {
  const AuditReport report = sample_report();
  EXPECT_EQ(report_from_json(Json::parse(to_json(report).dump())), report);
  Json broken = to_json(report);
  broken.as_object()["phases"].as_array()[1].as_object()["counters"].as_object().erase("h2d");
  try {
    report_from_json(broken);
    FAIL() << "accepted a report without h2d";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "report.phases[1].counters: missing field \"h2d\"");
  }
}

TEST(AuditReport, TableListsEveryPhaseAndNote) {
  const std::string table = format_table(sample_report());
  EXPECT_NE(table.find("dqn/epoch"), std::string::npos) << table;
  EXPECT_NE(table.find("12.0 MiB"), std::string::npos) << table;
  EXPECT_NE(table.find("note: a note"), std::string::npos) << table;
  EXPECT_EQ(format_bytes(8), "8 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
}

}  // namespace
