// The CfC recurrence forward over time steps [t_begin, t_end) (kernels/models/cfc/
// cfc_forward_steps.cu): per step, fused, for every batch row b (tests/reference/cfc_reference.h
// is the definition):
//   p     = p_in[t, b] + h_{t-1} Wh^T + b_bb          (p_in = x_t Wu^T, the hoisted input GEMM)
//   z     = 1.7159 tanh(0.666 p)                      -> z [L, B, U] (saved)
//   g     = z Wheads^T + b_heads                      (the stacked head GEMM, in the kernel)
//   default: f1 = tanh(g_ff1), f2 = tanh(g_ff2), s = sigmoid(g_ta ts + g_tb),
//            h_t = f1 (1 - s) + s f2                  -> cell[t, b] = [f1 | f2 | s] (saved)
//   pure:    h_t = -A exp(-ts (|w_tau| + |g|)) g + A  -> cell[t, b] = g (saved)
//   h_t                                               -> hs[t + 1, b]
// with ts = xt[t, b, time_column] (time_column >= 0) or 1. h_{t-1} is read from hs[t, b]; at
// t == 0 it is 0 and hs[0, b] is written 0 (so hs[0 .. L) are the states entering each step).
//
// Shapes (row-major, time-major: index (t * B + b)): xt [L, B, F], p_in [L, B, U],
// recurrent_t = Wh^T [H, U], heads_t = Wheads^T [U, heads * H], biases [U] and [heads * H],
// w_tau and A [H] (pure; null otherwise), z [L, B, U], cell [L, B, cell_width], hs [L + 1, B, H].
// Overwrites z, cell and hs at steps [t_begin, t_end) (and hs[0] when t_begin == 0); nothing
// else. A block owns kCfcRowsPerBlock rows for all its steps; every sum runs in a fixed order:
// deterministic, no atomics. Outputs must not alias inputs. 0 <= t_begin <= t_end <= L.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/models/cfc/cfc_step_shape.h"

namespace resident::kernels::cfc {

struct CfcForwardWeights {
  const float* recurrent_t = nullptr;  // [H, U]
  const float* backbone_bias = nullptr;  // [U]
  const float* heads_t = nullptr;      // [U, heads * H]
  const float* heads_bias = nullptr;   // [heads * H]
  const float* w_tau = nullptr;        // [H], pure only
  const float* A = nullptr;            // [H], pure only
};

void launch_cfc_forward_steps(float* z, float* cell, float* hs, const float* p_in,
                              const float* xt, const CfcForwardWeights& weights,
                              const CfcStepShape& shape, int t_begin, int t_end,
                              cudaStream_t stream);

}  // namespace resident::kernels::cfc
