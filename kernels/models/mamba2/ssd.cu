// Kernels and launchers of the Mamba2 SSD core (contracts in ssd.h; bodies in ssd_forward.cuh
// and ssd_backward.cuh).
#include <atomic>
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/mamba2/ssd_backward.cuh"
#include "kernels/models/mamba2/ssd_forward.cuh"

namespace resident::kernels::mamba2 {

namespace {

__global__ void __launch_bounds__(kSsdThreads) ssd_forward_kernel(SsdForwardArgs args) {
  extern __shared__ float smem[];
  DeviceBlock block{blockIdx.x, blockDim.x};
  ssd_forward_block(block, args, smem);
}

__global__ void __launch_bounds__(kSsdThreads) ssd_backward_kernel(SsdBackwardArgs args) {
  extern __shared__ float smem[];
  DeviceBlock block{blockIdx.x, blockDim.x};
  ssd_backward_block(block, args, smem);
}

void check_dims(const char* call, const SsdDims& d) {
  const bool ok = d.batch >= 1 && d.length >= 1 && d.heads >= 1 && d.headdim >= 1 &&
                  d.d_state >= 1 && d.chunk >= 1 &&
                  d.xbc_stride >= d.heads * d.headdim + 2 * d.d_state && d.dt_stride >= d.heads;
  if (!ok)
    throw Error(call, "invalid dims",
                "batch " + std::to_string(d.batch) + ", length " + std::to_string(d.length) +
                    ", heads " + std::to_string(d.heads) + ", headdim " +
                    std::to_string(d.headdim) + ", d_state " + std::to_string(d.d_state) +
                    ", chunk " + std::to_string(d.chunk) + ", xbc_stride " +
                    std::to_string(d.xbc_stride) + ", dt_stride " + std::to_string(d.dt_stride) +
                    " (each >= 1, strides at least the row widths)",
                __FILE__, __LINE__);
}

int shared_limit() {
  int device = 0;
  RESIDENT_CUDA_CHECK(cudaGetDevice(&device));
  int limit = 0;
  RESIDENT_CUDA_CHECK(
      cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return limit;
}

template <class Kernel>
void raise_limit(Kernel kernel, std::size_t bytes, const char* name) {
  const int limit = shared_limit();
  if (bytes > static_cast<std::size_t>(limit))
    throw Error("ssd_configure_shared_memory", "shared memory too small",
                std::string(name) + " needs " + std::to_string(bytes) +
                    " bytes of shared memory per block, the device allows " +
                    std::to_string(limit) + "; lower chunk, headdim or d_state",
                __FILE__, __LINE__);
  cudaFuncAttributes attributes{};
  RESIDENT_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  if (static_cast<std::size_t>(attributes.maxDynamicSharedSizeBytes) < bytes)
    RESIDENT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(bytes)));
}

// Dynamic shared memory each kernel has been raised to (setup writes, launches read).
std::atomic<std::size_t> g_forward_configured{48 * 1024};
std::atomic<std::size_t> g_backward_configured{48 * 1024};

void check_configured(const std::atomic<std::size_t>& configured, std::size_t bytes,
                      const char* call) {
  if (bytes > configured.load())
    throw Error(call, "shared memory not configured",
                "needs " + std::to_string(bytes) + " bytes, configured " +
                    std::to_string(configured.load()) + "; call ssd_configure_shared_memory at "
                    "setup",
                __FILE__, __LINE__);
}

}  // namespace

void ssd_configure_shared_memory(int Q, int P, int N) {
  const std::size_t forward = ssd_forward_shared_bytes(Q, P, N);
  const std::size_t backward = ssd_backward_shared_bytes(Q, P, N);
  raise_limit(ssd_forward_kernel, forward, "ssd_forward");
  raise_limit(ssd_backward_kernel, backward, "ssd_backward");
  if (g_forward_configured.load() < forward) g_forward_configured.store(forward);
  if (g_backward_configured.load() < backward) g_backward_configured.store(backward);
}

void launch_ssd_forward(const SsdForwardArgs& args, cudaStream_t stream) {
  check_dims("launch_ssd_forward", args.dims);
  const SsdDims& d = args.dims;
  const std::size_t bytes = ssd_forward_shared_bytes(d.chunk, d.headdim, d.d_state);
  check_configured(g_forward_configured, bytes, "launch_ssd_forward");
  if (ssd_chunks(d) > 1 && args.states == nullptr)
    throw Error("launch_ssd_forward", "missing states", "several chunks need a states buffer",
                __FILE__, __LINE__);
  NvtxRange range("mamba2::ssd_forward");
  ssd_forward_kernel<<<d.batch * d.heads, kSsdThreads, bytes, stream>>>(args);
  RESIDENT_CHECK_LAUNCH("ssd_forward_kernel");
}

void launch_ssd_backward(const SsdBackwardArgs& args, cudaStream_t stream) {
  check_dims("launch_ssd_backward", args.dims);
  const SsdDims& d = args.dims;
  const std::size_t bytes = ssd_backward_shared_bytes(d.chunk, d.headdim, d.d_state);
  check_configured(g_backward_configured, bytes, "launch_ssd_backward");
  if (ssd_chunks(d) > 1 && args.states == nullptr)
    throw Error("launch_ssd_backward", "missing states", "several chunks need the forward's states",
                __FILE__, __LINE__);
  NvtxRange range("mamba2::ssd_backward");
  ssd_backward_kernel<<<d.batch * d.heads, kSsdThreads, bytes, stream>>>(args);
  RESIDENT_CHECK_LAUNCH("ssd_backward_kernel");
}

}  // namespace resident::kernels::mamba2
