// TFT's LSTM encoder recurrence (kernels/models/tft/tft_lstm_forward.cu, tft_lstm_backward.cu;
// tests/reference/tft_reference.h step 3 is the definition). The input projection
// xproj = xi Wih^T + b is one GEMM over all B L rows before the loop and the weight gradients are
// GEMMs over all B L rows after it (the model's job); these kernels run only the serial part.
// One block per batch row, 4H threads (one per gate unit), the recurrent weight in shared memory;
// the block carries its row through all L steps (no grid-wide sync: rows are independent).
//
// Forward, per step t (h_{-1} = c_{-1} = 0; gates i, f, g, o in that order):
//   z = xproj[b, t] + h_{t-1} Whh^T;  i, f, o = sigmoid, g = tanh;
//   c_t = f c_{t-1} + i g;  h_t = o tanh(c_t)
// -> gates [B, L, 4H] (activated), cell [B, L, H] (c_t), h [B, L, H] (h_t), hprev [B, L, H]
//    (h_{t-1}, the operand of dWhh), all overwritten.
// Backward, t = L - 1 down to 0, from dh_above [B, L, H] (dLoss/dh_t through the layers above):
//   dh = dh_above[b, t] + dh_rec;  dc = dc_rec + dh o (1 - tanh(c_t)^2)
//   dz = [dc g i (1 - i) | dc c_{t-1} f (1 - f) | dc i (1 - g^2) | dh tanh(c_t) o (1 - o)]
//   dc_rec = dc f;  dh_rec = dz Whh
// -> dz [B, L, 4H] (overwritten): dWih = dz^T xi, db = column sums of dz, dxi = dz Wih and
//    dWhh = dz^T hprev follow as GEMMs.
// Every sum runs in a fixed order: deterministic, no atomics. Outputs must not alias inputs.
// hidden in [1, 64]; call prepare_lstm_kernels() once (outside any capture) before the first
// launch (it raises the kernels' shared-memory limit for hidden > 48).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::tft {

void prepare_lstm_kernels();

struct LstmForwardOutputs {
  float* gates = nullptr;  // [B, L, 4H]
  float* cell = nullptr;   // [B, L, H]
  float* h = nullptr;      // [B, L, H]
  float* hprev = nullptr;  // [B, L, H]
};

// xproj [B, L, 4H] (bias included); recurrent_weight = Whh [4H, H] as stored.
void launch_lstm_forward(const LstmForwardOutputs& out, const float* xproj,
                         const float* recurrent_weight, std::size_t batch, std::size_t steps,
                         std::size_t hidden, cudaStream_t stream);

void launch_lstm_backward(float* dz, const float* dh_above, const float* gates, const float* cell,
                          const float* recurrent_weight, std::size_t batch, std::size_t steps,
                          std::size_t hidden, cudaStream_t stream);

}  // namespace resident::kernels::tft
