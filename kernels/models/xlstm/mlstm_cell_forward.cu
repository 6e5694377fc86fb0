#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/xlstm/mlstm_cell.h"
#include "kernels/models/xlstm/mlstm_cell_math.cuh"

namespace resident::kernels::xlstm {

namespace {

constexpr unsigned kThreads = 256;

// One block per (sample, head): blockIdx.x = sample * NH + head. Shared: q, k, v [L, DH + 1],
// F, i~ [L], C [L, L]. Each output is one thread's fixed-order sum.
__global__ void __launch_bounds__(kThreads)
    mlstm_cell_forward(float* __restrict__ h, float* __restrict__ m_out, float* __restrict__ n_out,
                       float* __restrict__ r_out, const float* __restrict__ qkv,
                       const float* __restrict__ gates, MlstmCellShape s) {
  extern __shared__ float smem[];
  const int L = s.window, DH = s.head_dim, NH = s.heads, Di = NH * DH, P = padded_dim(DH);
  const int sample = blockIdx.x / NH, head = blockIdx.x % NH;
  const long long row0 = static_cast<long long>(sample) * L;
  float* q = smem;
  float* k = q + L * P;
  float* v = k + L * P;
  float* F = v + L * P;
  float* ig = F + L;
  float* C = ig + L;  // [L, L]
  for (int e = threadIdx.x; e < L * DH; e += blockDim.x) {
    const int t = e / DH, j = e % DH;
    const float* row = qkv + (row0 + t) * 3 * Di + head * DH + j;
    q[t * P + j] = row[0];
    k[t * P + j] = row[Di];
    v[t * P + j] = row[2 * Di];
  }
  for (int t = threadIdx.x; t < L; t += blockDim.x) ig[t] = gates[(row0 + t) * 2 * NH + head];
  forget_cumsum(F, gates, row0, 2 * NH, NH + head, L);
  __syncthreads();
  const float scale = rsqrtf(static_cast<float>(DH));
  for (int e = threadIdx.x; e < L * L; e += blockDim.x) {
    const int t = e / L, sidx = e % L;
    C[e] = sidx <= t ? F[t] - F[sidx] + ig[sidx] : 0.0f;  // logD for now
  }
  __syncthreads();
  // Row maxima m_t, kept in registers of the thread owning row t, then C_ts in place.
  for (int t = threadIdx.x; t < L; t += blockDim.x) {
    float m = C[t * L];
    for (int sidx = 1; sidx <= t; ++sidx) m = fmaxf(m, C[t * L + sidx]);
    m_out[(static_cast<long long>(sample) * NH + head) * L + t] = m;
    for (int sidx = 0; sidx <= t; ++sidx) C[t * L + sidx] = expf(C[t * L + sidx] - m);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < L * L; e += blockDim.x) {
    const int t = e / L, sidx = e % L;
    if (sidx > t) continue;
    float qk = 0.0f;
    for (int j = 0; j < DH; ++j) qk += q[t * P + j] * k[sidx * P + j];
    C[e] *= qk * scale;
  }
  __syncthreads();
  // r_t, n_t by the thread owning row t; the denominators go to F (no longer needed).
  for (int t = threadIdx.x; t < L; t += blockDim.x) {
    float r = 0.0f;
    for (int sidx = 0; sidx <= t; ++sidx) r += C[t * L + sidx];
    const long long at = (static_cast<long long>(sample) * NH + head) * L + t;
    const float n = fmaxf(fabsf(r), expf(-m_out[at]));
    r_out[at] = r;
    n_out[at] = n;
    F[t] = n + s.eps;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < L * DH; e += blockDim.x) {
    const int t = e / DH, j = e % DH;
    float acc = 0.0f;
    for (int sidx = 0; sidx <= t; ++sidx) acc += C[t * L + sidx] * v[sidx * P + j];
    h[(row0 + t) * Di + head * DH + j] = acc / F[t];
  }
}

}  // namespace

std::size_t mlstm_cell_forward_shared_bytes(int window, int head_dim) {
  const std::size_t L = static_cast<std::size_t>(window);
  return sizeof(float) * (3 * L * static_cast<std::size_t>(padded_dim(head_dim)) + 2 * L + L * L);
}

void configure_mlstm_cell_forward(std::size_t bytes) {
  cudaFuncAttributes attributes{};  // only raised: models of other windows may be alive
  RESIDENT_CUDA_CHECK(cudaFuncGetAttributes(&attributes, mlstm_cell_forward));
  if (static_cast<std::size_t>(attributes.maxDynamicSharedSizeBytes) < bytes)
    RESIDENT_CUDA_CHECK(cudaFuncSetAttribute(
        mlstm_cell_forward, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

void launch_mlstm_cell_forward(float* h, float* m, float* n, float* r, const float* qkv,
                               const float* gates, const MlstmCellShape& shape,
                               cudaStream_t stream) {
  if (shape.batch < 1 || shape.window < 1 || shape.heads < 1 || shape.head_dim < 1)
    throw Error("launch_mlstm_cell_forward", "invalid argument",
                "batch = " + std::to_string(shape.batch) + ", window = " +
                    std::to_string(shape.window) + ", heads = " + std::to_string(shape.heads) +
                    ", head_dim = " + std::to_string(shape.head_dim) + ", each allowed >= 1",
                __FILE__, __LINE__);
  const NvtxRange range("xlstm/mlstm_cell_forward");
  const std::size_t bytes = mlstm_cell_forward_shared_bytes(shape.window, shape.head_dim);
  mlstm_cell_forward<<<static_cast<unsigned>(shape.batch * shape.heads), kThreads, bytes,
                       stream>>>(h, m, n, r, qkv, gates, shape);
  RESIDENT_CHECK_LAUNCH("mlstm_cell_forward");
}

}  // namespace resident::kernels::xlstm
