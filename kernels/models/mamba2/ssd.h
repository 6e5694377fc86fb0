// The Mamba2 SSD (state space dual) core, forward and backward, one block per (sequence, head)
// (ssd.cu; bodies in ssd_forward.cuh, ssd_backward.cuh).
//
// Per head h of sequence b, over the window of L steps cut into chunks of Q (the last may be
// shorter), with x the head's P columns, B and C the N-wide columns shared by all heads,
// dt = softplus(dt_raw + dt_bias[h]) and A = -exp(A_log[h]), a_t = dt_t A <= 0:
//   cs_t = sum_{r = t0..t} a_r (t0 the chunk's first step), seg(t, s) = sum_{r = s+1..t} a_r,
//   y_t = sum_{s <= t in chunk} (C_t . B_s) exp(seg(t, s)) dt_s x_s + exp(cs_t) h_in C_t + D[h] x_t
//   h_out = exp(cs_end) h_in + sum_s exp(seg(end, s)) dt_s x_s B_s^T       (h_in = 0 at t0 = 0)
// seg is accumulated down each column of the chunk (never formed as cs_t - cs_s), so every
// exponent argument is <= 0. tests/reference/mamba2_reference.h defines the same map in double.
//
// Layouts (row = b * L + t): xbc [rows, xbc_stride] holds x at columns [0, H*P), B at
// [H*P, H*P+N), C at [H*P+N, H*P+2N); dt_raw [rows, dt_stride] has head h at column h; y and dy
// are [rows, H*P]. states [batch, H, chunks - 1, P, N] holds the state entering chunks 1.. (the
// forward writes it, the backward reads it; null when there is one chunk).
//
// The whole chunk lives in shared memory: ssd_forward_shared_bytes / ssd_backward_shared_bytes
// give the need, which must not exceed the device's opt-in limit (ssd_configure_shared_memory
// raises the kernels' limit at setup). Every reduction runs in a fixed order and every output
// element has one writer: deterministic, no atomics. Nothing allocated or synchronized.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::mamba2 {

inline constexpr int kSsdThreads = 256;

struct SsdDims {
  int batch = 0;
  int length = 0;   // L
  int heads = 0;    // H
  int headdim = 0;  // P
  int d_state = 0;  // N
  int chunk = 0;    // Q
  int xbc_stride = 0;
  int dt_stride = 0;
};

constexpr int ssd_chunks(const SsdDims& d) { return (d.length + d.chunk - 1) / d.chunk; }

// Shared-memory floats of one block (padded row strides avoid bank conflicts).
constexpr long long ssd_forward_shared_floats(int Q, int P, int N) {
  return 2LL * Q * (N + 1) + 1LL * Q * (P + 1) + 1LL * Q * (Q + 1) + 4LL * Q + 1LL * P * (N + 1);
}
constexpr long long ssd_backward_shared_floats(int Q, int P, int N) {
  return 4LL * Q * (N + 1) + 2LL * Q * (P + 1) + 2LL * Q * (Q + 1) + 2LL * P * (N + 1) +
         12LL * Q + 40;
}
constexpr std::size_t ssd_forward_shared_bytes(int Q, int P, int N) {
  return static_cast<std::size_t>(ssd_forward_shared_floats(Q, P, N)) * sizeof(float);
}
constexpr std::size_t ssd_backward_shared_bytes(int Q, int P, int N) {
  return static_cast<std::size_t>(ssd_backward_shared_floats(Q, P, N)) * sizeof(float);
}

struct SsdForwardArgs {
  SsdDims dims;
  float* y = nullptr;             // [rows, H*P], overwritten
  float* states = nullptr;        // [batch, H, chunks-1, P, N], overwritten; null if 1 chunk
  const float* xbc = nullptr;
  const float* dt_raw = nullptr;
  const float* dt_bias = nullptr;  // [H]
  const float* A_log = nullptr;    // [H]
  const float* D = nullptr;        // [H]
};

// The gradient of <dy, y>. Overwrites: the head's x columns of dxbc; dbc_heads [H, rows, 2N]
// (this head's dB in columns [0, N), dC in [N, 2N); the caller sums over heads); the head's
// column of ddt_raw (through the softplus); partials [3, batch, H] = (dA_log, dD, ddt_bias) of
// this (b, h), summed over the sequence's steps in order.
struct SsdBackwardArgs {
  SsdDims dims;
  float* dxbc = nullptr;       // [rows, xbc_stride]
  float* dbc_heads = nullptr;  // [H, rows, 2N]
  float* ddt_raw = nullptr;    // [rows, dt_stride]
  float* partials = nullptr;   // [3, batch, H]
  const float* dy = nullptr;   // [rows, H*P]
  const float* xbc = nullptr;
  const float* dt_raw = nullptr;
  const float* dt_bias = nullptr;
  const float* A_log = nullptr;
  const float* D = nullptr;
  const float* states = nullptr;  // the forward's
};

// Setup (not capturable): raises both kernels' dynamic shared-memory limit to what chunk Q,
// headdim P and d_state N need; throws resident::Error naming the need and the device's limit
// when it does not fit.
void ssd_configure_shared_memory(int Q, int P, int N);

void launch_ssd_forward(const SsdForwardArgs& args, cudaStream_t stream);
void launch_ssd_backward(const SsdBackwardArgs& args, cudaStream_t stream);

}  // namespace resident::kernels::mamba2
