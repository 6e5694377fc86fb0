// make_replay_buffer: the GPU replay when its device memory can be had, else the CPU sum-tree
// replay with a warning naming the bytes requested and available (DESIGN.md: the audit then
// shows the transfers that fallback costs).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "lib/replay/cpu_replay_buffer.h"
#include "lib/replay/gpu_replay_buffer.h"

namespace resident {

struct ReplayBackend {
  std::unique_ptr<GpuReplayBuffer> gpu;  // exactly one of gpu and cpu is set
  std::unique_ptr<CpuReplayBuffer> cpu;
  std::string warning;                   // empty on the GPU
  bool on_gpu() const noexcept { return gpu != nullptr; }
};

// `device_budget_bytes`: the most device memory the buffer may take; by default what
// cudaMemGetInfo reports free. A budget too small, or a failed cudaMalloc, selects the CPU
// buffer; the warning is also printed to stderr.
ReplayBackend make_replay_buffer(const ReplayConfig& config, std::size_t max_batch,
                                 std::uint64_t seed, cudaStream_t stream,
                                 std::optional<std::size_t> device_budget_bytes = std::nullopt);

}  // namespace resident
