// Programmatic dependent launch (kernels/core/programmatic_launch.cuh). A primary kernel lets the
// next kernel start at once, then spins ~200 us before it writes its result; the kernel launched
// after it by launch_after_prior:
// - with wait_for_prior_kernel reads the result (eagerly, in a captured graph, and as a
//   cooperative launch with a grid barrier);
// - without the wait (a contract breach, test-only) reads the value from before: the control
//   that shows the launches really overlap, so the first check is not passing by plain stream
//   order. With programmatic launches off the same breach reads the result (stream order).
//   (Sanitizers serialize kernels: run them with -*WithoutTheWait*.)
#include <cooperative_groups.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/core/programmatic_launch.cuh"
#include "lib/core/device_buffer.h"
#include "lib/core/programmatic_launch.h"
#include "lib/core/stream.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident;

constexpr std::int32_t kBefore = 7;
constexpr std::int32_t kResult = 42;
constexpr std::uint64_t kSpinNanoseconds = 200'000;

__device__ std::uint64_t global_nanoseconds() {
  std::uint64_t t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void slow_primary(std::int32_t* value) {
  kernels::allow_next_kernel_to_start();
  const std::uint64_t start = global_nanoseconds();
  while (global_nanoseconds() - start < kSpinNanoseconds) {
  }
  *value = kResult;
}

__global__ void waiting_reader(const std::int32_t* value, std::int32_t* seen) {
  kernels::wait_for_prior_kernel();
  seen[blockIdx.x] = *value;
}

__global__ void impatient_reader(const std::int32_t* value, std::int32_t* seen) {
  seen[blockIdx.x] = *reinterpret_cast<const volatile std::int32_t*>(value);
}

__global__ void cooperative_reader(const std::int32_t* value, std::int32_t* seen) {
  kernels::wait_for_prior_kernel();
  cooperative_groups::this_grid().sync();
  seen[blockIdx.x] = *value;
}

// Resets the value, poisons `seen`, runs the primary then `reader` on `blocks` blocks.
template <typename Reader>
std::vector<std::int32_t> run_pair(Reader reader, unsigned blocks, bool cooperative,
                                   cudaStream_t stream, DeviceBuffer<std::int32_t>& value,
                                   DeviceBuffer<std::int32_t>& seen) {
  value.upload(std::vector<std::int32_t>{kBefore});
  seen.upload(std::vector<std::int32_t>(seen.size(), -1));
  slow_primary<<<1, 32, 0, stream>>>(value.data());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  kernels::launch_after_prior({dim3(blocks), dim3(32), 0, cooperative}, stream, reader,
                              static_cast<const std::int32_t*>(value.data()), seen.data());
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  return seen.download();
}

TEST(ProgrammaticLaunch, TheWaitSeesThePriorKernelsResult) {
  RESIDENT_REQUIRE_GPU();
  Stream stream;
  DeviceBuffer<std::int32_t> value(1), seen(4);
  EXPECT_EQ(run_pair(waiting_reader, 4, false, stream.get(), value, seen),
            std::vector<std::int32_t>(4, kResult));
}

TEST(ProgrammaticLaunch, WithoutTheWaitTheNextKernelRunsEarly) {
  RESIDENT_REQUIRE_GPU();
  Stream stream;
  DeviceBuffer<std::int32_t> value(1), seen(4);
  ASSERT_TRUE(programmatic_launches_enabled());
  EXPECT_EQ(run_pair(impatient_reader, 4, false, stream.get(), value, seen),
            std::vector<std::int32_t>(4, kBefore))
      << "the reader did not overlap the primary: programmatic launches are not in effect";
  const ProgrammaticLaunchScope stream_ordered(false);
  EXPECT_EQ(run_pair(impatient_reader, 4, false, stream.get(), value, seen),
            std::vector<std::int32_t>(4, kResult))
      << "with programmatic launches off the launch must be stream-ordered";
}

TEST(ProgrammaticLaunch, CooperativeLaunchWaitsToo) {
  RESIDENT_REQUIRE_GPU();
  Stream stream;
  DeviceBuffer<std::int32_t> value(1), seen(8);
  EXPECT_EQ(run_pair(cooperative_reader, 8, true, stream.get(), value, seen),
            std::vector<std::int32_t>(8, kResult));
}

TEST(ProgrammaticLaunch, CapturedPairReplaysInOrder) {
  RESIDENT_REQUIRE_GPU();
  Stream stream;
  DeviceBuffer<std::int32_t> value(1), seen(4);
  const cudaStream_t s = stream.get();
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  slow_primary<<<1, 32, 0, s>>>(value.data());
  kernels::launch_after_prior({dim3(4), dim3(32)}, s, waiting_reader,
                              static_cast<const std::int32_t*>(value.data()), seen.data());
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    value.upload(std::vector<std::int32_t>{kBefore});
    seen.upload(std::vector<std::int32_t>(seen.size(), -1));
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(seen.download(), std::vector<std::int32_t>(4, kResult)) << "replay " << replay;
  }
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
}

}  // namespace
