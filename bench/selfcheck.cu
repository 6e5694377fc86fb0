// resident-selfcheck: names the GPU, then runs a small device-resident round trip through the
// core runtime (buffer, arena, stream, cuBLAS on the stream, one ScalarReadback) and checks the
// answer. Exit 0: the GPU and toolchain work. Exit 1: a check failed. Exit 2: no GPU.
#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

#include "lib/core/device_buffer.h"
#include "lib/core/device_info.h"
#include "lib/core/library_checks.h"
#include "lib/core/scalar_readback.h"
#include "lib/core/scratch_arena.h"
#include "lib/core/stream.h"

namespace {

__global__ void iota_kernel(float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<float>(i % 1000) * 0.001f;
}

int run() {
  std::string reason;
  const auto info = resident::probe_device(&reason);
  if (!info) {
    std::printf("resident-selfcheck: %s\n", reason.c_str());
    return 2;
  }
  std::printf("GPU %d: %s, sm_%d%d, %d SMs, %.1f GiB, driver CUDA %s, runtime CUDA %s\n",
              info->ordinal, info->name.c_str(), info->compute_major, info->compute_minor,
              info->multiprocessors, static_cast<double>(info->global_memory_bytes) / (1 << 30),
              resident::version_string(info->driver_version).c_str(),
              resident::version_string(info->runtime_version).c_str());

  const int n = 1 << 20;
  resident::StreamContext context;
  resident::ScratchPlan plan;
  plan.add<float>(n).add<float>(1);
  resident::ScratchArena arena(plan.bytes());
  float* x = arena.take<float>(n);
  float* dot = arena.take<float>(1);
  iota_kernel<<<(n + 255) / 256, 256, 0, context.stream()>>>(x, n);
  RESIDENT_CHECK_LAUNCH("iota_kernel");
  RESIDENT_CUBLAS_CHECK(cublasSetPointerMode(context.cublas(), CUBLAS_POINTER_MODE_DEVICE));
  RESIDENT_CUBLAS_CHECK(cublasSdot(context.cublas(), n, x, 1, x, 1, dot));
  resident::ScalarReadback<float> readback;
  readback.enqueue(dot, context.stream());
  const double got = readback.wait();

  double expected = 0;
  for (int i = 0; i < n; ++i) {
    const double v = static_cast<double>(static_cast<float>(i % 1000) * 0.001f);
    expected += v * v;
  }
  const double rel = std::abs(got - expected) / expected;
  std::printf("device dot product of %d values: %.6f (CPU fp64 %.6f, rel err %.2e)\n", n, got,
              expected, rel);
  if (rel > 1e-4) {
    std::printf("resident-selfcheck: FAILED (relative error above 1e-4)\n");
    return 1;
  }
  std::printf("resident-selfcheck: OK\n");
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resident-selfcheck: %s\n", e.what());
    return 1;
  }
}
