#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/xlstm/mlstm_cell.h"
#include "kernels/models/xlstm/mlstm_cell_math.cuh"

namespace resident::kernels::xlstm {

namespace {

constexpr unsigned kThreads = 256;

// One block per (sample, head). Shared: q, k, v, dh [L, DH + 1], F, dF, per-row scalars [L]
// (inv = 1 / (n + eps), dn * branch, m), and two [L, L] matrices A, G. Pass 1: A = C / (n + eps)
// -> dv. Pass 2: A = dC o D' / sqrt(DH), G = dC o C -> dq, dk, di~, dF -> df~. Every output is
// one thread's fixed-order sum.
__global__ void __launch_bounds__(kThreads)
    mlstm_cell_backward(float* __restrict__ dqkv, float* __restrict__ dgates,
                        const float* __restrict__ qkv, const float* __restrict__ gates,
                        const float* __restrict__ h, const float* __restrict__ m_in,
                        const float* __restrict__ n_in, const float* __restrict__ r_in,
                        const float* __restrict__ dh, MlstmCellShape s) {
  extern __shared__ float smem[];
  const int L = s.window, DH = s.head_dim, NH = s.heads, Di = NH * DH, P = padded_dim(DH);
  const int sample = blockIdx.x / NH, head = blockIdx.x % NH;
  const long long row0 = static_cast<long long>(sample) * L;
  const long long stat0 = (static_cast<long long>(sample) * NH + head) * L;
  float* q = smem;
  float* k = q + L * P;
  float* v = k + L * P;
  float* g = v + L * P;  // dh
  float* F = g + L * P;
  float* dF = F + L;
  float* ig = dF + L;
  float* inv = ig + L;
  float* dnb = inv + L;  // dn_t * sign(r_t) [|r_t| >= exp(-m_t)]
  float* mm = dnb + L;
  float* A = mm + L;  // [L, L]
  float* G = A + L * L;
  for (int e = threadIdx.x; e < L * DH; e += blockDim.x) {
    const int t = e / DH, j = e % DH;
    const float* row = qkv + (row0 + t) * 3 * Di + head * DH + j;
    q[t * P + j] = row[0];
    k[t * P + j] = row[Di];
    v[t * P + j] = row[2 * Di];
    g[t * P + j] = dh[(row0 + t) * Di + head * DH + j];
  }
  for (int t = threadIdx.x; t < L; t += blockDim.x) {
    ig[t] = gates[(row0 + t) * 2 * NH + head];
    const float n = n_in[stat0 + t], r = r_in[stat0 + t], m = m_in[stat0 + t];
    const float iv = 1.0f / (n + s.eps);
    float dot = 0.0f;
    for (int j = 0; j < DH; ++j) dot += dh[(row0 + t) * Di + head * DH + j] *
                                        h[(row0 + t) * Di + head * DH + j];
    const float branch = fabsf(r) >= expf(-m) ? (r > 0.0f ? 1.0f : (r < 0.0f ? -1.0f : 0.0f))
                                              : 0.0f;
    inv[t] = iv;
    dnb[t] = -iv * dot * branch;
    mm[t] = m;
  }
  forget_cumsum(F, gates, row0, 2 * NH, NH + head, L);
  __syncthreads();
  const float scale = rsqrtf(static_cast<float>(DH));
  // Pass 1: A_ts = C_ts / (n_t + eps), G_ts = dC_ts C_ts; dv_s = sum_t A_ts dh_t.
  for (int e = threadIdx.x; e < L * L; e += blockDim.x) {
    const int t = e / L, sidx = e % L;
    if (sidx <= t) {
      float qk = 0.0f;
      for (int j = 0; j < DH; ++j) qk += q[t * P + j] * k[sidx * P + j];
      const float dprime = expf(F[t] - F[sidx] + ig[sidx] - mm[t]);
      float dv_dot = 0.0f;
      for (int j = 0; j < DH; ++j) dv_dot += g[t * P + j] * v[sidx * P + j];
      const float c = qk * scale * dprime;
      A[e] = c * inv[t];
      G[e] = (inv[t] * dv_dot + dnb[t]) * c;
    } else {
      A[e] = 0.0f;
      G[e] = 0.0f;
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < L * DH; e += blockDim.x) {
    const int sidx = e / DH, j = e % DH;
    float acc = 0.0f;
    for (int t = sidx; t < L; ++t) acc += A[t * L + sidx] * g[t * P + j];
    dqkv[(row0 + sidx) * 3 * Di + 2 * Di + head * DH + j] = acc;
  }
  __syncthreads();
  // Pass 2: A_ts = dC_ts D'_ts / sqrt(DH) (recomputed: G / (q . k) would divide by ~0).
  for (int e = threadIdx.x; e < L * L; e += blockDim.x) {
    const int t = e / L, sidx = e % L;
    if (sidx > t) continue;
    float dv_dot = 0.0f;
    for (int j = 0; j < DH; ++j) dv_dot += g[t * P + j] * v[sidx * P + j];
    const float dprime = expf(F[t] - F[sidx] + ig[sidx] - mm[t]);
    A[e] = (inv[t] * dv_dot + dnb[t]) * dprime * scale;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < L * DH; e += blockDim.x) {
    const int t = e / DH, j = e % DH;
    float acc_q = 0.0f, acc_k = 0.0f;
    for (int sidx = 0; sidx <= t; ++sidx) acc_q += A[t * L + sidx] * k[sidx * P + j];
    for (int u = t; u < L; ++u) acc_k += A[u * L + t] * q[u * P + j];  // t as the key index
    float* row = dqkv + (row0 + t) * 3 * Di + head * DH + j;
    row[0] = acc_q;
    row[Di] = acc_k;
  }
  // di~_t = column sum of G; dF_t = row sum - column sum.
  for (int t = threadIdx.x; t < L; t += blockDim.x) {
    float row_sum = 0.0f, col_sum = 0.0f;
    for (int sidx = 0; sidx <= t; ++sidx) row_sum += G[t * L + sidx];
    for (int u = t; u < L; ++u) col_sum += G[u * L + t];
    dgates[(row0 + t) * 2 * NH + head] = col_sum;
    dF[t] = row_sum - col_sum;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float suffix = 0.0f;
    for (int t = L - 1; t >= 0; --t) {
      suffix += dF[t];
      const float f = gates[(row0 + t) * 2 * NH + NH + head];
      dgates[(row0 + t) * 2 * NH + NH + head] = suffix / (1.0f + expf(f));  // sigmoid(-f)
    }
  }
}

int device_shared_optin() {
  int device = 0, limit = 0;
  RESIDENT_CUDA_CHECK(cudaGetDevice(&device));
  RESIDENT_CUDA_CHECK(
      cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return limit;
}

}  // namespace

std::size_t mlstm_cell_backward_shared_bytes(int window, int head_dim) {
  const std::size_t L = static_cast<std::size_t>(window);
  return sizeof(float) *
         (4 * L * static_cast<std::size_t>(padded_dim(head_dim)) + 6 * L + 2 * L * L);
}

void configure_mlstm_cell_backward(std::size_t bytes) {
  cudaFuncAttributes attributes{};  // only raised: models of other windows may be alive
  RESIDENT_CUDA_CHECK(cudaFuncGetAttributes(&attributes, mlstm_cell_backward));
  if (static_cast<std::size_t>(attributes.maxDynamicSharedSizeBytes) < bytes)
    RESIDENT_CUDA_CHECK(cudaFuncSetAttribute(
        mlstm_cell_backward, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

void mlstm_cell_configure_shared_memory(int window, int head_dim) {
  const std::size_t forward = mlstm_cell_forward_shared_bytes(window, head_dim);
  const std::size_t backward = mlstm_cell_backward_shared_bytes(window, head_dim);
  const int limit = device_shared_optin();
  if (backward > static_cast<std::size_t>(limit))
    throw Error("mlstm_cell_configure_shared_memory", "shared memory too small",
                "window = " + std::to_string(window) + ", head_dim = " +
                    std::to_string(head_dim) + " need " + std::to_string(backward) +
                    " bytes per block, the device allows " + std::to_string(limit),
                __FILE__, __LINE__);
  configure_mlstm_cell_forward(forward);
  configure_mlstm_cell_backward(backward);
}

void launch_mlstm_cell_backward(float* dqkv, float* dgates, const float* qkv, const float* gates,
                                const float* h, const float* m, const float* n, const float* r,
                                const float* dh, const MlstmCellShape& shape,
                                cudaStream_t stream) {
  if (shape.batch < 1 || shape.window < 1 || shape.heads < 1 || shape.head_dim < 1)
    throw Error("launch_mlstm_cell_backward", "invalid argument",
                "batch = " + std::to_string(shape.batch) + ", window = " +
                    std::to_string(shape.window) + ", heads = " + std::to_string(shape.heads) +
                    ", head_dim = " + std::to_string(shape.head_dim) + ", each allowed >= 1",
                __FILE__, __LINE__);
  const NvtxRange range("xlstm/mlstm_cell_backward");
  const std::size_t bytes = mlstm_cell_backward_shared_bytes(shape.window, shape.head_dim);
  mlstm_cell_backward<<<static_cast<unsigned>(shape.batch * shape.heads), kThreads, bytes,
                        stream>>>(dqkv, dgates, qkv, gates, h, m, n, r, dh, shape);
  RESIDENT_CHECK_LAUNCH("mlstm_cell_backward");
}

}  // namespace resident::kernels::xlstm
