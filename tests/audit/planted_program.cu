// A stand-alone CUDA program (no resident code) with known transfers in named NVTX ranges, for
// resident-audit's end-to-end test:
//   setup        1 H2D of 1 MiB
//   epoch        a kernel, 1 scalar D2H of 4 B into pinned memory, 1 event sync
//                (with --leak: also 1 bulk D2H of 64 KiB from leak_bulk_copy)
//   epoch/inner  1 D2D copy and 1 memset
//   teardown     1 bulk D2H of 16 KiB, right before exit
// --fail makes it exit with status 7 after the work.
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(call)                                                                     \
  do {                                                                                  \
    const cudaError_t status_ = (call);                                                 \
    if (status_ != cudaSuccess) {                                                       \
      std::fprintf(stderr, "%s failed: %s at %s:%d\n", #call, cudaGetErrorString(status_), \
                   __FILE__, __LINE__);                                                 \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

__global__ void scale(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 2.0f * x[i] + 1.0f;
}

// Named, not inlined: the audit must name it as the call site of the leaked copy.
extern "C" __attribute__((noinline)) void leak_bulk_copy(std::vector<float>& host, const float* device) {
  CHECK(cudaMemcpy(host.data(), device, 64 * 1024, cudaMemcpyDeviceToHost));
}

int main(int argc, char** argv) {
  bool leak = false, fail = false;
  for (int i = 1; i < argc; ++i) {
    leak = leak || std::strcmp(argv[i], "--leak") == 0;
    fail = fail || std::strcmp(argv[i], "--fail") == 0;
  }
  const int n = 1 << 18;  // 1 MiB of floats
  float* x = nullptr;
  float* y = nullptr;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&y, n * sizeof(float)));
  float* pinned = nullptr;
  CHECK(cudaMallocHost(&pinned, sizeof(float)));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t done;
  CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  std::vector<float> host(n, 1.0f);

  nvtxRangePushA("setup");
  CHECK(cudaMemcpy(x, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  nvtxRangePop();

  nvtxRangePushA("epoch");
  scale<<<(n + 255) / 256, 256, 0, stream>>>(x, n);
  CHECK(cudaGetLastError());
  nvtxRangePushA("inner");
  CHECK(cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  CHECK(cudaMemsetAsync(x, 0, sizeof(float), stream));
  nvtxRangePop();
  CHECK(cudaMemcpyAsync(pinned, y, sizeof(float), cudaMemcpyDeviceToHost, stream));
  CHECK(cudaEventRecord(done, stream));
  CHECK(cudaEventSynchronize(done));
  if (leak) leak_bulk_copy(host, y);
  nvtxRangePop();
  std::printf("planted_program: y[0] = %.1f\n", static_cast<double>(*pinned));

  nvtxRangePushA("teardown");
  CHECK(cudaMemcpy(host.data(), y, 16 * 1024, cudaMemcpyDeviceToHost));
  nvtxRangePop();
  return fail ? 7 : 0;
}
