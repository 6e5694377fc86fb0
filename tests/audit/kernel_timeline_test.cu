// KernelTimeline on a GPU: kernels of known names that spin for known times (on %globaltimer,
// the GPU's ns clock, so the spin does not depend on the SM clock) come back in launch order,
// with durations near the spin, without overlap on one stream; a kernel on a second stream
// overlaps a long one; the kernels of a CUDA graph replay carry graph ids and share the
// launch's correlation id (what dev/dqn_step_timeline splits steps by); the record cap counts
// what it drops; and the timeline and the audit Tracer refuse to run beside each other.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "audit/kernel_timeline.h"
#include "audit/kernel_timeline_summary.h"
#include "audit/tracer.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident::audit;

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

__device__ __forceinline__ std::uint64_t global_ns() {
  std::uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

// Spins until `ns` nanoseconds have passed on the GPU's global timer (one warp, one block).
__device__ void spin_for(std::uint64_t ns) {
  const std::uint64_t begin = global_ns();
  while (global_ns() - begin < ns) {
  }
}

__global__ void timeline_spin_first(std::uint64_t ns) { spin_for(ns); }
__global__ void timeline_spin_second(std::uint64_t ns) { spin_for(ns); }
__global__ void timeline_spin_third(std::uint64_t ns) { spin_for(ns); }
__global__ void timeline_spin_beside(std::uint64_t ns) { spin_for(ns); }

constexpr std::uint64_t kShortNs = 20000;  // 20 us
constexpr std::uint64_t kLongNs = 50000;   // 50 us
constexpr std::uint64_t kOverlapNs = 20000000;  // 20 ms: the long kernel of the overlap case

// The records of kernels whose base name starts with "timeline_spin" (the context may run
// others, e.g. the runtime's own), in start order.
std::vector<KernelRecord> spins(const KernelTimelineResult& result) {
  std::vector<KernelRecord> out;
  for (const KernelRecord& k : result.kernels)
    if (kernel_base_name(k.name).rfind("timeline_spin", 0) == 0) out.push_back(k);
  return out;
}

void print(const std::vector<KernelRecord>& kernels) {
  for (const KernelRecord& k : kernels)
    std::printf("  %-22s stream %u corr %u graph %u node %llu: start +%.2f us, %.2f us\n",
                kernel_base_name(k.name).c_str(), k.stream_id, k.correlation_id, k.graph_id,
                static_cast<unsigned long long>(k.graph_node_id),
                static_cast<double>(k.start_ns - kernels.front().start_ns) / 1000.0,
                static_cast<double>(k.duration_ns()) / 1000.0);
}

// A spin of `ns` measured by CUPTI: not shorter (less 1 us for the two clocks' granularity),
// and not much longer on an idle GPU (launch and scheduling add a few us at most).
void expect_duration_near(const KernelRecord& k, std::uint64_t ns) {
  const double measured_us = static_cast<double>(k.duration_ns()) / 1000.0;
  const double spin_us = static_cast<double>(ns) / 1000.0;
  EXPECT_GE(measured_us, spin_us - 1.0) << k.name;
  EXPECT_LE(measured_us, spin_us * 1.25 + 5.0) << k.name;
  std::printf("  %s: spin %.1f us, measured %.2f us (%.1f%% over)\n", kernel_base_name(k.name).c_str(),
              spin_us, measured_us, 100.0 * (measured_us - spin_us) / spin_us);
}

class KernelTimelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RESIDENT_REQUIRE_GPU();
    CUDA_OK(cudaFree(nullptr));
    CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&other_stream_, cudaStreamNonBlocking));
    // Warm up: the first launch of each kernel loads its module.
    timeline_spin_first<<<1, 32, 0, stream_>>>(1000);
    timeline_spin_second<<<1, 32, 0, stream_>>>(1000);
    timeline_spin_third<<<1, 32, 0, stream_>>>(1000);
    timeline_spin_beside<<<1, 32, 0, stream_>>>(1000);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
  }
  void TearDown() override {
    if (Tracer::instance().running()) Tracer::instance().stop();
    if (other_stream_ != nullptr) cudaStreamDestroy(other_stream_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  cudaStream_t stream_ = nullptr;
  cudaStream_t other_stream_ = nullptr;
};

TEST_F(KernelTimelineTest, KernelsOnOneStreamInOrderWithTheirDurations) {
  KernelTimeline timeline;
  timeline.start();
  EXPECT_TRUE(timeline.running());
  EXPECT_TRUE(KernelTimeline::any_running());
  timeline_spin_first<<<1, 32, 0, stream_>>>(kShortNs);
  timeline_spin_second<<<1, 32, 0, stream_>>>(kLongNs);
  timeline_spin_third<<<2, 64, 0, stream_>>>(kShortNs);
  CUDA_OK(cudaGetLastError());
  const KernelTimelineResult result = timeline.stop_and_collect();
  EXPECT_FALSE(timeline.running());
  EXPECT_FALSE(KernelTimeline::any_running());
  EXPECT_TRUE(result.complete()) << result.dropped_by_cupti << " " << result.dropped_over_cap << " "
                                 << result.incomplete;
  const std::vector<KernelRecord> k = spins(result);
  print(k);
  ASSERT_EQ(k.size(), 3u);
  EXPECT_EQ(kernel_base_name(k[0].name), "timeline_spin_first");
  EXPECT_EQ(kernel_base_name(k[1].name), "timeline_spin_second");
  EXPECT_EQ(kernel_base_name(k[2].name), "timeline_spin_third");
  EXPECT_NE(k[0].name.find("timeline_spin_first(unsigned long"), std::string::npos)
      << "demangled: " << k[0].name;
  expect_duration_near(k[0], kShortNs);
  expect_duration_near(k[1], kLongNs);
  expect_duration_near(k[2], kShortNs);
  for (std::size_t i = 1; i < k.size(); ++i) {
    EXPECT_GE(k[i].start_ns, k[i - 1].end_ns) << "overlap on one stream at " << i;
    EXPECT_EQ(k[i].stream_id, k[0].stream_id);
    EXPECT_NE(k[i].correlation_id, k[i - 1].correlation_id);
    EXPECT_EQ(k[i].graph_node_id, 0u);
  }
  EXPECT_EQ(k[2].grid[0], 2);
  EXPECT_EQ(k[2].block[0], 64);
  EXPECT_EQ(k[0].grid[0], 1);
  EXPECT_EQ(k[0].block[0], 32);
}

TEST_F(KernelTimelineTest, AKernelOnASecondStreamOverlaps) {
  // Each kernel launched once before (with lazy module loading a kernel's first launch loads
  // it), and the long kernel spins 20 ms: on the H200 the beside kernel's launch under a new
  // timeline still started 2.1 ms after a 200 us long kernel (6 ms without the warm-up): the
  // host's first launch of a function under CUPTI's kernel records is slow, not the GPU.
  timeline_spin_first<<<1, 32, 0, stream_>>>(0);
  timeline_spin_beside<<<1, 32, 0, other_stream_>>>(0);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  KernelTimeline timeline;
  timeline.start();
  timeline_spin_first<<<1, 32, 0, stream_>>>(kOverlapNs);         // 20 ms
  timeline_spin_beside<<<1, 32, 0, other_stream_>>>(kShortNs);    // 20 us, meanwhile
  CUDA_OK(cudaGetLastError());
  const KernelTimelineResult result = timeline.stop_and_collect();
  const std::vector<KernelRecord> k = spins(result);
  print(k);
  ASSERT_EQ(k.size(), 2u);
  const KernelRecord& long_one = kernel_base_name(k[0].name) == "timeline_spin_first" ? k[0] : k[1];
  const KernelRecord& beside = kernel_base_name(k[0].name) == "timeline_spin_first" ? k[1] : k[0];
  EXPECT_EQ(kernel_base_name(beside.name), "timeline_spin_beside");
  EXPECT_NE(long_one.stream_id, beside.stream_id);
  EXPECT_LT(beside.start_ns, long_one.end_ns);
  EXPECT_LT(long_one.start_ns, beside.end_ns);
  expect_duration_near(beside, kShortNs);
}

TEST_F(KernelTimelineTest, GraphReplaysShareTheirLaunchCorrelationId) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  timeline_spin_first<<<1, 32, 0, stream_>>>(kShortNs);
  timeline_spin_second<<<1, 32, 0, stream_>>>(kLongNs);
  CUDA_OK(cudaStreamEndCapture(stream_, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphDestroy(graph));

  KernelTimeline timeline;
  timeline.start();
  constexpr int kReplays = 3;
  for (int r = 0; r < kReplays; ++r) CUDA_OK(cudaGraphLaunch(exec, stream_));
  const KernelTimelineResult result = timeline.stop_and_collect();
  CUDA_OK(cudaGraphExecDestroy(exec));
  const std::vector<KernelRecord> k = spins(result);
  print(k);
  ASSERT_EQ(k.size(), 2u * kReplays);
  for (const KernelRecord& r : k) {
    EXPECT_NE(r.graph_node_id, 0u);
    EXPECT_NE(r.graph_id, 0u);
  }
  std::vector<KernelRecord> outside;
  const KernelSteps steps = split_by_launch(k, 2, &outside);
  EXPECT_TRUE(outside.empty());
  ASSERT_EQ(steps.size(), static_cast<std::size_t>(kReplays)) << "kernels of one replay should share a correlation id";
  const StepTimelineSummary summary = summarize_steps(steps);
  std::printf("%s", format_step_summary(summary).c_str());
  EXPECT_EQ(summary.steps_summarized, static_cast<std::size_t>(kReplays));
  ASSERT_EQ(summary.kernels.size(), 2u);
  EXPECT_EQ(summary.kernels[0].base_name, "timeline_spin_first");
  EXPECT_NEAR(summary.kernels[1].median_duration_us, kLongNs / 1000.0, kLongNs / 1000.0 * 0.25 + 5.0);
  EXPECT_GE(*summary.kernels[1].median_gap_same_stream_us, 0.0);
}

TEST_F(KernelTimelineTest, TheCapCountsWhatItDrops) {
  KernelTimeline timeline(KernelTimelineOptions{.max_records = 2});
  timeline.start();
  for (int i = 0; i < 5; ++i) timeline_spin_first<<<1, 32, 0, stream_>>>(1000);
  CUDA_OK(cudaGetLastError());
  const KernelTimelineResult result = timeline.stop_and_collect();
  EXPECT_EQ(result.kernels.size(), 2u);
  EXPECT_EQ(result.dropped_over_cap, 3u);
  EXPECT_FALSE(result.complete());
  ASSERT_FALSE(result.notes().empty());
  EXPECT_NE(result.notes().front().find("lower bounds"), std::string::npos) << result.notes().front();
  EXPECT_THROW(KernelTimeline(KernelTimelineOptions{.max_records = 0}), AuditError);
}

TEST_F(KernelTimelineTest, RefusesToRunBesideTheTracerOrAnotherTimeline) {
  KernelTimeline timeline;
  EXPECT_THROW((void)timeline.stop_and_collect(), AuditError);  // not running

  Tracer::instance().start();
  try {
    timeline.start();
    ADD_FAILURE() << "KernelTimeline::start succeeded while the Tracer runs";
  } catch (const AuditError& e) {
    std::printf("  refused: %s\n", e.what());
    EXPECT_NE(std::string(e.what()).find("Tracer is running"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(timeline.running());
  EXPECT_FALSE(KernelTimeline::any_running());
  Tracer::instance().stop();

  timeline.start();
  try {
    Tracer::instance().start();
    ADD_FAILURE() << "Tracer::start succeeded while a KernelTimeline runs";
  } catch (const AuditError& e) {
    std::printf("  refused: %s\n", e.what());
    EXPECT_NE(std::string(e.what()).find("KernelTimeline is running"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(Tracer::instance().running());
  KernelTimeline second;
  EXPECT_THROW(second.start(), AuditError);
  EXPECT_THROW(timeline.start(), AuditError);

  // Still records after the refusals, and the Tracer starts again once it stopped.
  timeline_spin_first<<<1, 32, 0, stream_>>>(1000);
  CUDA_OK(cudaGetLastError());
  EXPECT_EQ(spins(timeline.stop_and_collect()).size(), 1u);
  Tracer::instance().start();
  EXPECT_TRUE(Tracer::instance().running());
  Tracer::instance().stop();
}

TEST_F(KernelTimelineTest, TheTracerStillCountsCopiesAfterATimeline) {
  // The timeline registered its own CUPTI buffer callbacks; the Tracer's start registers its
  // own again.
  {
    KernelTimeline timeline;
    timeline.start();
    timeline_spin_first<<<1, 32, 0, stream_>>>(1000);
    (void)timeline.stop_and_collect();
  }
  Tracer::instance().start();
  Tracer::instance().reset();
  void* device = nullptr;
  CUDA_OK(cudaMalloc(&device, 4096));
  std::vector<char> host(4096);
  {
    Phase phase("after_timeline");
    CUDA_OK(cudaMemcpy(host.data(), device, 4096, cudaMemcpyDeviceToHost));
  }
  const AuditReport report = Tracer::instance().snapshot();
  Tracer::instance().stop();
  CUDA_OK(cudaFree(device));
  const PhaseReport* phase = report.find("after_timeline");
  ASSERT_NE(phase, nullptr) << format_table(report);
  EXPECT_EQ(phase->counters.d2h_bulk, 1u) << format_table(report);
}

}  // namespace
