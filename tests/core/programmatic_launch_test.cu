// Programmatic dependent launch (kernels/core/programmatic_launch.cuh). A primary kernel lets the
// next kernel start at once, waits, then writes its result; the kernel launched after it by
// launch_after_prior:
// - with wait_for_prior_kernel reads the result (eagerly, as a cooperative launch with a grid
//   barrier, and in a captured graph, whose edge must be a programmatic one);
// - without the wait (a contract breach, test-only) reads the value from before the primary's
//   write: the control that shows the launches really overlap, so the checks above do not pass
//   by plain stream order. A handshake makes it deterministic: the impatient reader raises a
//   flag after its read and the primary writes only once it sees the flag (or after a 2 s
//   timeout, when there was no overlap: the check then fails naming it). With programmatic
//   launches off the same breach reads the result (stream order; the primary times out).
// And after a cross-stream event wait (the trainer's fork and join), eagerly and captured, the
// waiting reader still reads the other stream's result.
// A cooperative launch with the programmatic attribute is accepted but was stream-ordered on the
// H200 (an impatient cooperative reader read the result in all five runs, three
// alone, one with eager module loading, one under ctest), so there is no overlap control for
// it: CooperativeLaunchWaitsToo checks only that its wait is correct.
// Sanitizers serialize kernels: run them with -*WithoutTheWait*.
#include <cooperative_groups.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/core/programmatic_launch.cuh"
#include "kernels/core/programmatic_launch.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident;

constexpr std::int32_t kBefore = 7;
constexpr std::int32_t kResult = 42;
constexpr std::uint64_t kShortSpinNanoseconds = 200'000;
constexpr std::uint64_t kHandshakeTimeoutNanoseconds = 2'000'000'000;

__device__ std::uint64_t global_nanoseconds() {
  std::uint64_t t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Lets the next kernel start, then waits: for `readers` raised flags when readers > 0 (the
// impatient readers' handshake; at most the timeout), else a fixed 200 us; then writes.
__global__ void slow_primary(std::int32_t* value, const std::int32_t* flags, unsigned readers) {
  kernels::allow_next_kernel_to_start();
  const std::uint64_t start = global_nanoseconds();
  if (readers == 0) {
    while (global_nanoseconds() - start < kShortSpinNanoseconds) {
    }
  } else {
    const volatile std::int32_t* raised = flags;
    for (unsigned r = 0; r < readers; ++r)
      while (raised[r] == 0 && global_nanoseconds() - start < kHandshakeTimeoutNanoseconds) {
      }
  }
  *value = kResult;
}

__global__ void waiting_reader(const std::int32_t* value, std::int32_t* seen, std::int32_t*) {
  kernels::wait_for_prior_kernel();
  seen[blockIdx.x] = *value;
}

__global__ void cooperative_reader(const std::int32_t* value, std::int32_t* seen,
                                   std::int32_t*) {
  kernels::wait_for_prior_kernel();
  cooperative_groups::this_grid().sync();
  seen[blockIdx.x] = *value;
}

// The contract breach: no wait. Reads, then raises its block's flag.
__global__ void impatient_reader(const std::int32_t* value, std::int32_t* seen,
                                 std::int32_t* flags) {
  seen[blockIdx.x] = *reinterpret_cast<const volatile std::int32_t*>(value);
  __threadfence();
  *reinterpret_cast<volatile std::int32_t*>(flags + blockIdx.x) = 1;
}

struct Pair {
  DeviceBuffer<std::int32_t> value{1}, seen, flags;
  explicit Pair(unsigned blocks) : seen(blocks), flags(blocks) {}

  void reset() {
    value.upload(std::vector<std::int32_t>{kBefore});
    seen.upload(std::vector<std::int32_t>(seen.size(), -1));
    flags.upload(std::vector<std::int32_t>(flags.size(), 0));
  }

  // The primary then `reader` on seen.size() blocks; the primary waits for the readers' flags
  // when `handshake`.
  void enqueue(void (*reader)(const std::int32_t*, std::int32_t*, std::int32_t*), bool handshake,
               bool cooperative, cudaStream_t stream) {
    const auto blocks = static_cast<unsigned>(seen.size());
    slow_primary<<<1, 32, 0, stream>>>(value.data(), flags.data(), handshake ? blocks : 0u);
    RESIDENT_CUDA_CHECK(cudaGetLastError());
    kernels::launch_after_prior({dim3(blocks), dim3(32), 0, cooperative}, stream, reader,
                                static_cast<const std::int32_t*>(value.data()), seen.data(),
                                flags.data());
  }

  // A warm-up pair first: with lazy module loading (the default) the first launch of a kernel
  // loads it, which can wait for the running primary, so the reader could not overlap it.
  std::vector<std::int32_t> run(void (*reader)(const std::int32_t*, std::int32_t*,
                                               std::int32_t*),
                                bool handshake, bool cooperative, cudaStream_t stream) {
    reset();
    enqueue(reader, false, cooperative, stream);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    reset();
    enqueue(reader, handshake, cooperative, stream);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    return seen.download();
  }
};

// Programmatic launches need sm_90; below it the attribute is refused or ignored.
bool device_has_programmatic_launch() {
  int device = 0, major = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) ==
             cudaSuccess &&
         major >= 9;
}

#define REQUIRE_PROGRAMMATIC_LAUNCH()                                          \
  do {                                                                         \
    RESIDENT_REQUIRE_GPU();                                                    \
    if (!device_has_programmatic_launch())                                     \
      GTEST_SKIP() << "programmatic dependent launch needs compute capability 9.0"; \
  } while (0)

TEST(ProgrammaticLaunch, TheWaitSeesThePriorKernelsResult) {
  REQUIRE_PROGRAMMATIC_LAUNCH();
  Stream stream;
  Pair pair(4);
  EXPECT_EQ(pair.run(waiting_reader, false, false, stream.get()),
            std::vector<std::int32_t>(4, kResult));
}

TEST(ProgrammaticLaunch, CooperativeLaunchWaitsToo) {
  REQUIRE_PROGRAMMATIC_LAUNCH();
  Stream stream;
  Pair pair(8);
  EXPECT_EQ(pair.run(cooperative_reader, false, true, stream.get()),
            std::vector<std::int32_t>(8, kResult));
}

TEST(ProgrammaticLaunch, WithoutTheWaitTheNextKernelRunsEarly) {
  REQUIRE_PROGRAMMATIC_LAUNCH();
  Stream stream;
  ASSERT_TRUE(programmatic_launches_enabled());
  {
    Pair pair(4);
    EXPECT_EQ(pair.run(impatient_reader, true, false, stream.get()),
              std::vector<std::int32_t>(4, kBefore))
        << "the reader did not overlap the primary: programmatic launches are not in effect";
  }
  const ProgrammaticLaunchScope stream_ordered(false);
  Pair pair(4);
  EXPECT_EQ(pair.run(impatient_reader, true, false, stream.get()),
            std::vector<std::int32_t>(4, kResult))
      << "with programmatic launches off the launch must be stream-ordered";
}

TEST(ProgrammaticLaunch, CapturedPairHasAProgrammaticEdgeAndReplaysInOrder) {
  REQUIRE_PROGRAMMATIC_LAUNCH();
  Stream stream;
  Pair pair(4);
  const cudaStream_t s = stream.get();
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  pair.enqueue(waiting_reader, false, false, s);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  std::size_t edges = 0;
  ASSERT_EQ(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &edges), cudaSuccess);
  ASSERT_EQ(edges, 1u);
  cudaGraphNode_t from = nullptr, to = nullptr;
  cudaGraphEdgeData edge{};
  ASSERT_EQ(cudaGraphGetEdges(graph, &from, &to, &edge, &edges), cudaSuccess);
  EXPECT_EQ(edge.type, cudaGraphDependencyTypeProgrammatic);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    pair.reset();
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(pair.seen.download(), std::vector<std::int32_t>(4, kResult)) << "replay " << replay;
  }
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
}

TEST(ProgrammaticLaunch, AfterAnEventWaitOnAnotherStreamTheWaitSeesItsResult) {
  REQUIRE_PROGRAMMATIC_LAUNCH();
  Stream main_stream, side_stream;
  cudaEvent_t written = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&written, cudaEventDisableTiming), cudaSuccess);
  Pair pair(4);
  const cudaStream_t s = main_stream.get(), side = side_stream.get();
  // The main stream forks to the side stream (a capture must start and end on one stream),
  // the side stream's primary writes, the main stream waits for it and launches the reader.
  cudaEvent_t fork = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), cudaSuccess);
  const auto enqueue = [&] {
    RESIDENT_CUDA_CHECK(cudaEventRecord(fork, s));
    RESIDENT_CUDA_CHECK(cudaStreamWaitEvent(side, fork, 0));
    slow_primary<<<1, 32, 0, side>>>(pair.value.data(), pair.flags.data(), 0u);
    RESIDENT_CUDA_CHECK(cudaGetLastError());
    RESIDENT_CUDA_CHECK(cudaEventRecord(written, side));
    RESIDENT_CUDA_CHECK(cudaStreamWaitEvent(s, written, 0));
    kernels::launch_after_prior({dim3(4), dim3(32)}, s, waiting_reader,
                                static_cast<const std::int32_t*>(pair.value.data()),
                                pair.seen.data(), pair.flags.data());
  };
  pair.reset();
  enqueue();
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(pair.seen.download(), std::vector<std::int32_t>(4, kResult)) << "eager";
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  enqueue();
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  pair.reset();
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(pair.seen.download(), std::vector<std::int32_t>(4, kResult)) << "captured";
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(fork), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(written), cudaSuccess);
}

}  // namespace
