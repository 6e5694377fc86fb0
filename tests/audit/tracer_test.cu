// The in-process tracer on a GPU: transfers of every flavor planted in their own phase, each
// counted exactly (count, bytes, host memory kind, implicit syncs) in that phase and nowhere
// else; a pure device workload counts zero host transfers; attribution follows the issuing
// thread's phase; a contract violation names the function that issued the copy.
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <thrust/copy.h>
#include <thrust/device_vector.h>

#include <cstring>
#include <thread>
#include <vector>

#include "audit/contract.h"
#include "audit/testing.h"
#include "audit/tracer.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident::audit;

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

__device__ float g_symbol_floats[3];
__device__ int g_symbol_int;

__global__ void fill(float* x, int n, float value) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = value + static_cast<float>(i);
}

class TracerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RESIDENT_REQUIRE_GPU();
    Tracer::instance().start();
    Tracer::instance().reset();
    CUDA_OK(cudaMalloc(&device_, kBytes));
    CUDA_OK(cudaMemset(device_, 0, kBytes));
    CUDA_OK(cudaMallocHost(&pinned_, kBytes));
    CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_OK(cudaDeviceSynchronize());
    Tracer::instance().reset();  // the fixture's own setup is not under test
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (pinned_ != nullptr) cudaFreeHost(pinned_);
    if (device_ != nullptr) cudaFree(device_);
  }

  // The single phase `name` of a fresh snapshot; fails if other phases saw anything.
  PhaseCounters only_phase(const std::string& name) {
    const AuditReport report = Tracer::instance().snapshot();
    const PhaseReport* phase = report.find(name);
    EXPECT_NE(phase, nullptr) << format_table(report);
    for (const PhaseReport& p : report.phases)
      if (p.phase != name) EXPECT_EQ(p.counters, PhaseCounters{}) << "phase " << p.phase << "\n" << format_table(report);
    std::printf("%s", format_table(report).c_str());
    return phase ? phase->counters : PhaseCounters{};
  }

  static constexpr std::size_t kBytes = 1 << 20;
  char* device_ = nullptr;
  char* pinned_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

TEST_F(TracerTest, BlockingMemcpyToPageable) {
  std::vector<char> host(4096);
  {
    Phase phase("memcpy_pageable");
    CUDA_OK(cudaMemcpy(host.data(), device_, 4096, cudaMemcpyDeviceToHost));
  }
  const PhaseCounters c = only_phase("memcpy_pageable");
  EXPECT_EQ(c.d2h_bulk, 1u);
  EXPECT_EQ(c.d2h_bulk_bytes, 4096u);
  EXPECT_EQ(c.d2h_scalar, 0u);
  EXPECT_EQ(c.host_pageable, 1u);
  EXPECT_EQ(c.sync_implicit, 1u);
  EXPECT_EQ(c.syncs(), 1u);
}

TEST_F(TracerTest, AsyncScalarToPinnedWithStreamSync) {
  {
    Phase phase("scalar_pinned");
    CUDA_OK(cudaMemcpyAsync(pinned_, device_, 4, cudaMemcpyDeviceToHost, stream_));
    CUDA_OK(cudaStreamSynchronize(stream_));
  }
  const PhaseCounters c = only_phase("scalar_pinned");
  EXPECT_EQ(c.d2h_scalar, 1u);
  EXPECT_EQ(c.d2h_scalar_bytes, 4u);
  EXPECT_EQ(c.d2h_bulk, 0u);
  EXPECT_EQ(c.host_pinned, 1u);
  EXPECT_EQ(c.sync_stream, 1u);
  EXPECT_EQ(c.sync_implicit, 0u);
}

TEST_F(TracerTest, AsyncBulkToPageableIsAnImplicitSync) {
  std::vector<char> host(8192);
  {
    Phase phase("async_pageable");
    CUDA_OK(cudaMemcpyAsync(host.data(), device_, 8192, cudaMemcpyDeviceToHost, stream_));
  }
  const PhaseCounters c = only_phase("async_pageable");
  EXPECT_EQ(c.d2h_bulk, 1u);
  EXPECT_EQ(c.d2h_bulk_bytes, 8192u);
  EXPECT_EQ(c.host_pageable, 1u);
  EXPECT_EQ(c.sync_implicit, 1u);
}

TEST_F(TracerTest, Memcpy2D) {
  std::vector<char> host(16 * 64);
  {
    Phase phase("memcpy2d");
    CUDA_OK(cudaMemcpy2D(host.data(), 64, device_, 256, 64, 16, cudaMemcpyDeviceToHost));
  }
  const PhaseCounters c = only_phase("memcpy2d");
  EXPECT_EQ(c.d2h_bulk, 1u);
  EXPECT_EQ(c.d2h_bulk_bytes, 16u * 64u);
}

TEST_F(TracerTest, MemcpyFromSymbolScalarAndBulk) {
  float floats[3];
  int value = 0;
  {
    Phase phase("from_symbol");
    CUDA_OK(cudaMemcpyFromSymbol(floats, g_symbol_floats, sizeof floats));
    CUDA_OK(cudaMemcpyFromSymbol(&value, g_symbol_int, sizeof value));
  }
  const PhaseCounters c = only_phase("from_symbol");
  EXPECT_EQ(c.d2h_bulk, 1u);
  EXPECT_EQ(c.d2h_bulk_bytes, 12u);
  EXPECT_EQ(c.d2h_scalar, 1u);
  EXPECT_EQ(c.d2h_scalar_bytes, 4u);
}

using MemcpyDtoH = CUresult(void*, CUdeviceptr, size_t);

// cuMemcpyDtoH through the runtime's entry-point query (the tests do not link libcuda), or null.
MemcpyDtoH* driver_memcpy_dtoh() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuMemcpyDtoH", &fn, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<MemcpyDtoH*>(fn);
}

TEST_F(TracerTest, DriverMemcpyDtoH) {
  MemcpyDtoH* const memcpy_dtoh = driver_memcpy_dtoh();
  ASSERT_NE(memcpy_dtoh, nullptr);
  std::vector<char> host(256);
  {
    Phase phase("driver");
    ASSERT_EQ(memcpy_dtoh(host.data(), reinterpret_cast<CUdeviceptr>(device_), 256), CUDA_SUCCESS);
  }
  const PhaseCounters c = only_phase("driver");
  EXPECT_EQ(c.d2h_bulk, 1u);
  EXPECT_EQ(c.d2h_bulk_bytes, 256u);
  EXPECT_EQ(c.sync_implicit, 1u);
}

TEST_F(TracerTest, CublasGetVector) {
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  CUDA_OK(cudaDeviceSynchronize());
  Tracer::instance().reset();
  std::vector<float> host(100);
  {
    Phase phase("cublas_get");
    ASSERT_EQ(cublasGetVector(100, sizeof(float), device_, 1, host.data(), 1), CUBLAS_STATUS_SUCCESS);
  }
  const PhaseCounters c = only_phase("cublas_get");
  EXPECT_EQ(c.d2h(), 1u);
  EXPECT_EQ(c.d2h_bulk_bytes, 400u);
  cublasDestroy(handle);
}

TEST_F(TracerTest, ThrustCopyToHost) {
  thrust::device_vector<int> dv(1000, 7);
  CUDA_OK(cudaDeviceSynchronize());
  Tracer::instance().reset();
  std::vector<int> host(1000);
  {
    Phase phase("thrust_copy");
    thrust::copy(dv.begin(), dv.end(), host.begin());
  }
  const PhaseCounters c = only_phase("thrust_copy");
  EXPECT_EQ(c.d2h_bulk, 1u);
  EXPECT_EQ(c.d2h_bulk_bytes, 4000u);
  EXPECT_EQ(c.h2d, 0u);
  EXPECT_EQ(host[999], 7);
}

TEST_F(TracerTest, HostToDevice) {
  std::vector<char> host(kBytes, 1);
  {
    Phase phase("upload");
    CUDA_OK(cudaMemcpy(device_, host.data(), kBytes, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpyAsync(device_, pinned_, 100, cudaMemcpyHostToDevice, stream_));
    CUDA_OK(cudaStreamSynchronize(stream_));
  }
  const PhaseCounters c = only_phase("upload");
  EXPECT_EQ(c.h2d, 2u);
  EXPECT_EQ(c.h2d_bytes, kBytes + 100);
  EXPECT_EQ(c.host_pageable, 1u);
  EXPECT_EQ(c.host_pinned, 1u);
  EXPECT_EQ(c.d2h(), 0u);
  EXPECT_EQ(c.sync_implicit, 1u);  // the blocking cudaMemcpy
  EXPECT_EQ(c.sync_stream, 1u);
}

TEST_F(TracerTest, HostReadOfManagedMemoryIsUnifiedMemoryD2H) {
  const int n = 1 << 16;  // 256 KiB
  float* managed = nullptr;
  {
    Phase phase("managed_alloc");
    CUDA_OK(cudaMallocManaged(&managed, n * sizeof(float)));
  }
  fill<<<n / 256, 256>>>(managed, n, 1.0f);
  CUDA_OK(cudaDeviceSynchronize());
  double sum = 0;
  {
    Phase phase("um_read");
    for (int i = 0; i < n; ++i) sum += managed[i];
  }
  const AuditReport report = Tracer::instance().snapshot();
  std::printf("%s", format_table(report).c_str());
  for (const std::string& note : report.notes) ADD_FAILURE() << "note: " << note;
  ASSERT_NE(report.find("um_read"), nullptr);
  ASSERT_NE(report.find("managed_alloc"), nullptr);
  EXPECT_EQ(report.find("managed_alloc")->counters.managed_allocs, 1u);
  const PhaseCounters& c = report.find("um_read")->counters;
  EXPECT_GE(c.um_d2h_bytes, n * sizeof(float));
  EXPECT_EQ(c.d2h(), 0u);  // no memcpy: the traffic is migration
  EXPECT_EQ(report.find("managed_alloc")->counters.um_d2h_bytes, 0u);
  EXPECT_GT(sum, 0.0);
  CUDA_OK(cudaFree(managed));
}

TEST_F(TracerTest, MappedAllocationIsReportedAndBreaksAContract) {
  void* mapped = nullptr;
  void* plain_pinned = nullptr;
  {
    Phase phase("mapped");
    CUDA_OK(cudaHostAlloc(&mapped, 4096, cudaHostAllocMapped));
    CUDA_OK(cudaHostAlloc(&plain_pinned, 4096, cudaHostAllocDefault));  // not zero-copy
  }
  const AuditReport report = Tracer::instance().snapshot();
  ASSERT_NE(report.find("mapped"), nullptr);
  EXPECT_EQ(report.find("mapped")->counters.mapped_allocs, 1u);
  const auto violations = check_contracts(report, {{.phase = "mapped"}});
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_EQ(violations[0].limit, "allow_mapped");
  EXPECT_TRUE(check_contracts(report, {{.phase = "mapped", .allow_mapped = true}}).empty());
  CUDA_OK(cudaFreeHost(mapped));
  CUDA_OK(cudaFreeHost(plain_pinned));
}

TEST_F(TracerTest, PureDeviceWorkloadHasNoHostTransfers) {
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetStream(handle, stream_), CUBLAS_STATUS_SUCCESS);
  const int m = 256;
  float *a = nullptr, *b = nullptr, *c = nullptr;
  CUDA_OK(cudaMalloc(&a, m * m * sizeof(float)));
  CUDA_OK(cudaMalloc(&b, m * m * sizeof(float)));
  CUDA_OK(cudaMalloc(&c, m * m * sizeof(float)));
  fill<<<m * m / 256, 256, 0, stream_>>>(a, m * m, 0.5f);  // warm-up launch and cuBLAS init
  const float one = 1.0f, zero = 0.0f;
  ASSERT_EQ(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a, m, a, m, &zero, c, m),
            CUBLAS_STATUS_SUCCESS);
  CUDA_OK(cudaDeviceSynchronize());
  Tracer::instance().reset();
  {
    Phase phase("device_only");
    for (int step = 0; step < 10; ++step) {
      fill<<<m * m / 256, 256, 0, stream_>>>(a, m * m, static_cast<float>(step));
      CUDA_OK(cudaMemcpyAsync(b, a, m * m * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
      ASSERT_EQ(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a, m, b, m, &zero, c, m),
                CUBLAS_STATUS_SUCCESS);
    }
  }
  const PhaseCounters counters = only_phase("device_only");
  EXPECT_EQ(counters.d2h(), 0u);
  EXPECT_EQ(counters.h2d, 0u);
  EXPECT_EQ(counters.syncs(), 0u);
  EXPECT_EQ(counters.d2d, 10u);
  EXPECT_EQ(counters.d2d_bytes, 10u * m * m * sizeof(float));
  RESIDENT_EXPECT_WITHIN_CONTRACT(
      Tracer::instance().snapshot(),
      (std::vector<TransferContract>{{.phase = "device_only", .max_d2h_scalar = 0, .max_d2h_bulk = 0,
                                      .max_h2d = 0, .max_syncs = 0}}));
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cublasDestroy(handle);
}

TEST_F(TracerTest, SyncKindsAndMemsets) {
  cudaEvent_t event;
  CUDA_OK(cudaEventCreate(&event));
  {
    Phase phase("syncs");
    CUDA_OK(cudaMemsetAsync(device_, 1, 1024, stream_));
    CUDA_OK(cudaEventRecord(event, stream_));
    CUDA_OK(cudaEventSynchronize(event));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaStreamSynchronize(stream_));
  }
  const PhaseCounters c = only_phase("syncs");
  EXPECT_EQ(c.memsets, 1u);
  EXPECT_EQ(c.sync_event, 1u);
  EXPECT_EQ(c.sync_device, 1u);
  EXPECT_EQ(c.sync_stream, 1u);
  EXPECT_EQ(c.sync_implicit, 0u);
  cudaEventDestroy(event);
}

TEST_F(TracerTest, NestedPhasesAndLateRecordsKeepTheirPhase) {
  {
    Phase outer("outer");
    {
      Phase inner("inner");
      // Queued behind a long kernel: the record completes after both phases end.
      fill<<<4096, 256, 0, stream_>>>(reinterpret_cast<float*>(device_), 4096 * 256 / 4, 1.0f);
      CUDA_OK(cudaMemcpyAsync(pinned_, device_, 64, cudaMemcpyDeviceToHost, stream_));
    }
    EXPECT_EQ(current_phase(), "outer");
  }
  EXPECT_EQ(current_phase(), kUnscopedPhase);
  const PhaseCounters c = only_phase("outer/inner");
  EXPECT_EQ(c.d2h_bulk, 1u);
  EXPECT_EQ(c.d2h_bulk_bytes, 64u);
}

TEST_F(TracerTest, EachThreadAttributesToItsOwnPhase) {
  std::vector<char> host_a(128), host_b(256);
  {
    Phase main_phase("main_thread");
    std::thread worker([&] {
      Phase worker_phase("worker_thread");
      EXPECT_EQ(cudaMemcpy(host_b.data(), device_, 256, cudaMemcpyDeviceToHost), cudaSuccess);
    });
    worker.join();
    CUDA_OK(cudaMemcpy(host_a.data(), device_, 128, cudaMemcpyDeviceToHost));
  }
  const AuditReport report = Tracer::instance().snapshot();
  ASSERT_TRUE(report.find("main_thread") && report.find("worker_thread")) << format_table(report);
  EXPECT_EQ(report.find("main_thread")->counters.d2h_bulk_bytes, 128u);
  EXPECT_EQ(report.find("worker_thread")->counters.d2h_bulk_bytes, 256u);
}

TEST_F(TracerTest, CopyInsideAGraphIsAttributedToTheLaunch) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  fill<<<1, 256, 0, stream_>>>(reinterpret_cast<float*>(device_), 256, 3.0f);
  CUDA_OK(cudaMemcpyAsync(pinned_, device_, 8, cudaMemcpyDeviceToHost, stream_));
  CUDA_OK(cudaStreamEndCapture(stream_, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaDeviceSynchronize());
  Tracer::instance().reset();
  {
    Phase phase("graph");
    for (int i = 0; i < 3; ++i) CUDA_OK(cudaGraphLaunch(exec, stream_));
  }
  const AuditReport report = Tracer::instance().snapshot();
  ASSERT_NE(report.find("graph"), nullptr) << format_table(report);
  const PhaseReport& p = *report.find("graph");
  EXPECT_EQ(p.counters.d2h_scalar, 3u) << format_table(report);
  ASSERT_FALSE(p.d2h_sites.empty());
  EXPECT_EQ(p.d2h_sites[0].api, "cudaGraphLaunch");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// Every call's entry leaves the tracer once its record arrives (a runtime copy files two ids:
// its own and its driver call's; both must go), so a loop of copies, memsets and graph launches
// with a copy node leaves nothing behind once a snapshot has flushed the records.
TEST_F(TracerTest, MatchedCallsLeaveNothingPending) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  CUDA_OK(cudaMemcpyAsync(pinned_ + 64, device_, 8, cudaMemcpyDeviceToHost, stream_));
  CUDA_OK(cudaStreamEndCapture(stream_, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaDeviceSynchronize());
  Tracer::instance().reset();
  ASSERT_EQ(Tracer::instance().pending_calls(), 0u);
  constexpr unsigned kCalls = 500;
  MemcpyDtoH* const memcpy_dtoh = driver_memcpy_dtoh();
  ASSERT_NE(memcpy_dtoh, nullptr);
  {
    Phase phase("loop");
    for (unsigned i = 0; i < kCalls; ++i) {
      CUDA_OK(cudaMemcpyAsync(pinned_, device_, 4, cudaMemcpyDeviceToHost, stream_));
      CUDA_OK(cudaMemsetAsync(device_ + 128, 0, 16, stream_));
      CUDA_OK(cudaGraphLaunch(exec, stream_));
    }
    ASSERT_EQ(memcpy_dtoh(pinned_ + 32, reinterpret_cast<CUdeviceptr>(device_), 4), CUDA_SUCCESS);
    CUDA_OK(cudaStreamSynchronize(stream_));
  }
  const PhaseCounters c = only_phase("loop");
  EXPECT_EQ(c.d2h_scalar, 2 * kCalls + 1);
  EXPECT_EQ(c.memsets, kCalls);
  EXPECT_EQ(Tracer::instance().pending_calls(), 0u) << "calls whose records came still wait";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// A graph without copy or memset nodes never yields a record: its launches must not pile up
// (a training run replays such graphs millions of times under the audit). The tracer forgets
// them oldest first past its bound, and a copy launched after them still finds its phase.
TEST_F(TracerTest, GraphLaunchesWithoutRecordsDoNotPileUp) {
  constexpr std::size_t kBoundIds = std::size_t{1} << 16;  // kMaxPendingGraphLaunches, tracer.cpp
  constexpr int kLaunches = 80000;                          // 160000 ids: well past the bound
  cudaGraph_t kernel_graph, copy_graph;
  cudaGraphExec_t kernel_exec, copy_exec;
  CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  fill<<<1, 32, 0, stream_>>>(reinterpret_cast<float*>(device_), 32, 1.0f);
  CUDA_OK(cudaStreamEndCapture(stream_, &kernel_graph));
  CUDA_OK(cudaGraphInstantiate(&kernel_exec, kernel_graph, 0));
  CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  CUDA_OK(cudaMemcpyAsync(pinned_, device_, 8, cudaMemcpyDeviceToHost, stream_));
  CUDA_OK(cudaStreamEndCapture(stream_, &copy_graph));
  CUDA_OK(cudaGraphInstantiate(&copy_exec, copy_graph, 0));
  CUDA_OK(cudaDeviceSynchronize());
  Tracer::instance().reset();
  {
    Phase phase("replays");
    for (int i = 0; i < kLaunches; ++i) {
      CUDA_OK(cudaGraphLaunch(kernel_exec, stream_));
      if (i % 4096 == 0) CUDA_OK(cudaStreamSynchronize(stream_));  // a bounded queue
    }
    EXPECT_LE(Tracer::instance().pending_calls(), kBoundIds);
    EXPECT_GT(Tracer::instance().pending_calls(), 0u) << "graph launches are not tracked at all";
    CUDA_OK(cudaGraphLaunch(copy_exec, stream_));
    CUDA_OK(cudaStreamSynchronize(stream_));
  }
  const AuditReport report = Tracer::instance().snapshot();
  const PhaseReport* replays = report.find("replays");
  ASSERT_NE(replays, nullptr) << format_table(report);
  EXPECT_EQ(replays->counters.d2h_scalar, 1u) << format_table(report);
  EXPECT_EQ(replays->counters.sync_stream, static_cast<std::uint64_t>(kLaunches / 4096 + 2));
  for (const std::string& note : report.notes)
    EXPECT_EQ(note.find("matched no traced API call"), std::string::npos) << note;
  EXPECT_LE(Tracer::instance().pending_calls(), kBoundIds);
  cudaGraphExecDestroy(copy_exec);
  cudaGraphDestroy(copy_graph);
  cudaGraphExecDestroy(kernel_exec);
  cudaGraphDestroy(kernel_graph);
}

// Not inlined, with external linkage: the violation must name it.
__attribute__((noinline)) void leaky_train_step(std::vector<float>& host, const void* device) {
  ASSERT_EQ(cudaMemcpy(host.data(), device, host.size() * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
}

TEST_F(TracerTest, ViolationNamesTheCallSite) {
  std::vector<float> host(1 << 18);  // 1 MiB, the whole device buffer
  {
    Phase model("dqn");
    Phase epoch("epoch");
    leaky_train_step(host, device_);
  }
  const AuditReport report = Tracer::instance().snapshot();
  const auto violations =
      check_contracts(report, {{.phase = "dqn/epoch", .max_d2h_scalar = 2, .max_d2h_bulk = 0}});
  ASSERT_EQ(violations.size(), 1u) << format_table(report);
  std::printf("%s\n", violations[0].message.c_str());
  EXPECT_NE(violations[0].message.find(
                "dqn/epoch: 1 bulk D2H (1.0 MiB), contract 0; first: cudaMemcpy from "
                "(anonymous namespace)::leaky_train_step"),
            std::string::npos)
      << violations[0].message;
  EXPECT_NE(violations[0].message.find("tests/audit/tracer_test.cu:"), std::string::npos)
      << violations[0].message;
}

// Not inlined: the sync site must name it.
__attribute__((noinline)) void blocking_wait(cudaStream_t stream) {
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
}

TEST_F(TracerTest, SyncCallSitesOnRequest) {
  Tracer::instance().stop();
  TracerOptions options;
  options.capture_sync_stacks = true;
  Tracer::instance().start(options);
  volatile int repeats = 64;  // a runtime bound: the loop is at most partly unrolled
  {
    Phase phase("sync_sites");
    for (int i = 0; i < repeats; ++i) blocking_wait(stream_);
  }
  const AuditReport report = Tracer::instance().snapshot();
  Tracer::instance().stop();
  Tracer::instance().start();  // back to the defaults for the other tests
  ASSERT_NE(report.find("sync_sites"), nullptr) << format_table(report);
  const PhaseReport& p = *report.find("sync_sites");
  EXPECT_EQ(p.counters.sync_stream, 64u);
  // Repeats from one call site share a site (an unrolled loop has a few call instructions).
  ASSERT_FALSE(p.sync_sites.empty());
  EXPECT_LE(p.sync_sites.size(), 8u);
  std::uint64_t counted = 0;
  for (const CallSite& site : p.sync_sites) {
    counted += site.count;
    EXPECT_EQ(site.api, "cudaStreamSynchronize");
    ASSERT_FALSE(site.frames.empty());
    EXPECT_NE(site.frames[0].function.find("blocking_wait"), std::string::npos)
        << site.frames[0].function;
  }
  EXPECT_EQ(counted, 64u);
  const auto violations = check_contracts(report, {{.phase = "sync_sites", .max_syncs = 1}});
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_NE(violations[0].message.find("64 syncs (64 stream), contract 1; first: cudaStreamSynchronize "
                                       "from (anonymous namespace)::blocking_wait"),
            std::string::npos)
      << violations[0].message;
}

}  // namespace
