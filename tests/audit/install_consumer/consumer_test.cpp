// A user's GoogleTest file against the installed package: RESIDENT_EXPECT_WITHIN_CONTRACT on a
// report, and the in-process tracer around a readback (skipped without a GPU).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "audit/testing.h"
#include "audit/tracer.h"

namespace {

using namespace resident::audit;

const std::vector<TransferContract> kEpochContract = {
    {.phase = "epoch", .max_d2h_scalar = 1, .max_d2h_bulk = 0, .max_h2d = 0, .max_syncs = 1}};

TEST(Consumer, ChecksAReportAgainstItsContract) {
  AuditReport report;
  report.phases.push_back({.phase = "epoch", .counters = {.d2h_scalar = 1, .d2h_scalar_bytes = 4}});
  RESIDENT_EXPECT_WITHIN_CONTRACT(report, kEpochContract);
  report.phases[0].counters.d2h_bulk = 1;
  EXPECT_FALSE(within_contract(report, kEpochContract));
}

TEST(Consumer, AuditsAReadbackInProcess) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no GPU";
  Tracer::instance().start();
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, sizeof(float)), cudaSuccess);
  {
    Phase epoch("epoch");
    float host = 0;
    ASSERT_EQ(cudaMemcpy(&host, device, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  const AuditReport report = Tracer::instance().snapshot();
  Tracer::instance().stop();
  cudaFree(device);
  ASSERT_NE(report.find("epoch"), nullptr) << format_table(report);
  EXPECT_EQ(report.find("epoch")->counters.d2h_scalar, 1u);
  RESIDENT_EXPECT_WITHIN_CONTRACT(report, kEpochContract);
}

}  // namespace
