#include "lib/replay/replay_factory.h"

#include <cstdio>

#include "kernels/core/error.h"

namespace resident {

namespace {

std::string gib(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

ReplayBackend cpu_fallback(const ReplayConfig& config, const std::string& reason) {
  ReplayBackend backend;
  backend.cpu = std::make_unique<CpuReplayBuffer>(config);
  backend.warning = "resident: GPU replay unavailable (" + reason +
                    "); falling back to the CPU sum-tree replay: batches and TD errors will "
                    "cross the bus every step";
  std::fprintf(stderr, "%s\n", backend.warning.c_str());
  return backend;
}

}  // namespace

ReplayBackend make_replay_buffer(const ReplayConfig& config, std::size_t max_batch,
                                 std::uint64_t seed, cudaStream_t stream,
                                 std::optional<std::size_t> device_budget_bytes) {
  validate(config);
  const std::size_t needed = GpuReplayBuffer::device_bytes(config, max_batch);
  std::size_t budget = 0;
  if (device_budget_bytes) {
    budget = *device_budget_bytes;
  } else {
    std::size_t free_bytes = 0, total_bytes = 0;
    RESIDENT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    budget = free_bytes;
  }
  if (needed > budget)
    return cpu_fallback(config, "needs " + std::to_string(needed) + " bytes (" + gib(needed) +
                                    ") of device memory, " + std::to_string(budget) + " bytes (" +
                                    gib(budget) + ") available");
  try {
    ReplayBackend backend;
    backend.gpu = std::make_unique<GpuReplayBuffer>(config, max_batch, seed, stream);
    return backend;
  } catch (const Error& e) {
    if (e.error_name() != "cudaErrorMemoryAllocation") throw;
    return cpu_fallback(config, "cudaMalloc failed while allocating " + std::to_string(needed) +
                                    " bytes (" + gib(needed) + "): " + e.what());
  }
}

}  // namespace resident
