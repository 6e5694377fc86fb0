// TFT's LSTM recurrence, forward (contract in tft_lstm.h).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/tft/tft_lstm.h"

namespace resident::kernels::tft {

namespace {

__device__ inline float sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }

// Shared memory: Whh^T [H, 4H] (unit u fastest: conflict-free reads), h [H], gates [4H].
__global__ void __launch_bounds__(256)
    lstm_forward(LstmForwardOutputs out, const float* xproj, const float* whh, int steps,
                 int hidden) {
  extern __shared__ float shared[];
  const int G = 4 * hidden, u = threadIdx.x, b = blockIdx.x;
  float* wt = shared;
  float* h = wt + G * hidden;
  float* gate = h + hidden;
  for (int i = u; i < G * hidden; i += G) {
    const int row = i / hidden, k = i % hidden;  // whh[row, k]
    wt[k * G + row] = whh[i];
  }
  if (u < hidden) h[u] = 0.0f;
  float c = 0.0f;  // thread u < H: c_{t-1} of unit u
  __syncthreads();
  const std::size_t base = static_cast<std::size_t>(b) * steps;
  for (int t = 0; t < steps; ++t) {
    const std::size_t row = base + t;
    float z = xproj[row * G + u];
    for (int k = 0; k < hidden; ++k) z = fmaf(wt[k * G + u], h[k], z);
    const float a = u / hidden == 2 ? tanhf(z) : sigmoid(z);
    gate[u] = a;
    out.gates[row * G + u] = a;
    __syncthreads();
    if (u < hidden) {
      const float i = gate[u], f = gate[hidden + u], g = gate[2 * hidden + u];
      const float o = gate[3 * hidden + u];
      out.hprev[row * hidden + u] = h[u];
      c = fmaf(f, c, i * g);
      const float hn = o * tanhf(c);
      out.cell[row * hidden + u] = c;
      out.h[row * hidden + u] = hn;
      h[u] = hn;
    }
    __syncthreads();
  }
}

std::size_t shared_bytes(std::size_t hidden) {
  return (4 * hidden * hidden + hidden + 4 * hidden) * sizeof(float);
}

}  // namespace

void launch_lstm_forward(const LstmForwardOutputs& out, const float* xproj,
                         const float* recurrent_weight, std::size_t batch, std::size_t steps,
                         std::size_t hidden, cudaStream_t stream) {
  if (batch == 0 || batch > 2147483647u || steps == 0 || hidden == 0 || hidden > 64)
    throw Error("launch_lstm_forward", "invalid argument",
                "batch = " + std::to_string(batch) + ", steps = " + std::to_string(steps) +
                    ", hidden = " + std::to_string(hidden) +
                    "; allowed batch, steps >= 1, hidden in [1, 64]",
                __FILE__, __LINE__);
  const NvtxRange range("tft/lstm_forward");
  lstm_forward<<<static_cast<unsigned>(batch), static_cast<unsigned>(4 * hidden),
                 shared_bytes(hidden), stream>>>(out, xproj, recurrent_weight,
                                                 static_cast<int>(steps),
                                                 static_cast<int>(hidden));
  RESIDENT_CHECK_LAUNCH("lstm_forward");
}

void prepare_lstm_forward_kernel() {
  RESIDENT_CUDA_CHECK(cudaFuncSetAttribute(lstm_forward,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(shared_bytes(64))));
}

}  // namespace resident::kernels::tft
