// TFT's LSTM recurrence, reverse-time backward (contract in tft_lstm.h).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/tft/tft_lstm.h"

namespace resident::kernels::tft {

void prepare_lstm_forward_kernel();  // tft_lstm_forward.cu

namespace {

// Shared memory: Whh [4H, H] as stored (unit k fastest: conflict-free reads), dz [4H] and the
// four partial sums [4, H] of dz Whh. Thread q = part * H + k sums units part H .. part H + H - 1
// for column k; thread k < H adds the four parts in order and carries dh_rec, dc_rec.
__global__ void __launch_bounds__(256)
    lstm_backward(float* dz_out, const float* dh_above, const float* gates, const float* cell,
                  const float* whh, int steps, int hidden) {
  extern __shared__ float shared[];
  const int G = 4 * hidden, q = threadIdx.x, b = blockIdx.x;
  float* w = shared;
  float* dz = w + G * hidden;
  float* part = dz + G;
  for (int i = q; i < G * hidden; i += G) w[i] = whh[i];
  float dh_rec = 0.0f, dc_rec = 0.0f;  // thread q < H: of unit q
  __syncthreads();
  const std::size_t base = static_cast<std::size_t>(b) * steps;
  for (int t = steps - 1; t >= 0; --t) {
    const std::size_t row = base + t;
    if (q < hidden) {
      const float* gt = gates + row * G;
      const float i = gt[q], f = gt[hidden + q], g = gt[2 * hidden + q], o = gt[3 * hidden + q];
      const float c = cell[row * hidden + q];
      const float cp = t > 0 ? cell[(row - 1) * hidden + q] : 0.0f;
      const float dh = dh_above[row * hidden + q] + dh_rec;
      const float tc = tanhf(c);
      const float dc = dc_rec + dh * o * (1.0f - tc * tc);
      const float di = dc * g * i * (1.0f - i);
      const float df = dc * cp * f * (1.0f - f);
      const float dg = dc * i * (1.0f - g * g);
      const float d_o = dh * tc * o * (1.0f - o);
      dz[q] = di;
      dz[hidden + q] = df;
      dz[2 * hidden + q] = dg;
      dz[3 * hidden + q] = d_o;
      float* out = dz_out + row * G;
      out[q] = di;
      out[hidden + q] = df;
      out[2 * hidden + q] = dg;
      out[3 * hidden + q] = d_o;
      dc_rec = dc * f;
    }
    __syncthreads();
    {
      const int p = q / hidden, k = q % hidden;
      float s = 0.0f;
      for (int u = p * hidden; u < (p + 1) * hidden; ++u) s = fmaf(w[u * hidden + k], dz[u], s);
      part[p * hidden + k] = s;
    }
    __syncthreads();
    if (q < hidden)
      dh_rec = ((part[q] + part[hidden + q]) + part[2 * hidden + q]) + part[3 * hidden + q];
  }
}

std::size_t shared_bytes(std::size_t hidden) {
  return (4 * hidden * hidden + 8 * hidden) * sizeof(float);
}

}  // namespace

void launch_lstm_backward(float* dz, const float* dh_above, const float* gates, const float* cell,
                          const float* recurrent_weight, std::size_t batch, std::size_t steps,
                          std::size_t hidden, cudaStream_t stream) {
  if (batch == 0 || batch > 2147483647u || steps == 0 || hidden == 0 || hidden > 64)
    throw Error("launch_lstm_backward", "invalid argument",
                "batch = " + std::to_string(batch) + ", steps = " + std::to_string(steps) +
                    ", hidden = " + std::to_string(hidden) +
                    "; allowed batch, steps >= 1, hidden in [1, 64]",
                __FILE__, __LINE__);
  const NvtxRange range("tft/lstm_backward");
  lstm_backward<<<static_cast<unsigned>(batch), static_cast<unsigned>(4 * hidden),
                  shared_bytes(hidden), stream>>>(dz, dh_above, gates, cell, recurrent_weight,
                                                  static_cast<int>(steps),
                                                  static_cast<int>(hidden));
  RESIDENT_CHECK_LAUNCH("lstm_backward");
}

void prepare_lstm_kernels() {
  prepare_lstm_forward_kernel();
  RESIDENT_CUDA_CHECK(cudaFuncSetAttribute(lstm_backward,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(shared_bytes(64))));
}

}  // namespace resident::kernels::tft
