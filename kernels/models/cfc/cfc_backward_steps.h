// The CfC recurrence backward over time steps [t_begin, t_end), in reverse time (kernels/models/
// cfc/cfc_backward_steps.cu): per step t = t_end - 1 down to t_begin, fused, for every batch row b,
// from dh = dLoss/dh_t and what the forward saved (cfc_forward_steps.h):
//   default: s, f1, f2 from cell[t, b];  ds = dh (f2 - f1) s (1 - s)
//            dg = [dh (1 - s)(1 - f1^2) | dh s (1 - f2^2) | ds ts | ds]
//   pure:    f = cell[t, b], e = exp(-ts (|w_tau| + |f|))
//            dg = dh (-A e (1 - ts |f|)),  qa = dh (1 - e f),  qw = dh A f e ts sign(w_tau)
//   dz = dg Wheads                                       (the stacked head GEMM, in the kernel)
//   dp = dz 1.7159 0.666 (1 - (z / 1.7159)^2)            (z[t, b] saved)
//   dh <- dp Wh                                          (dLoss/dh_{t-1})
// -> dg [L, B, heads * H], dp [L, B, U], and in pure mode qa, qw [L, B, H] (the per-(step, row)
// terms of dA and dw_tau), overwritten at steps [t_begin, t_end); the parameter gradients are
// GEMMs and fixed-order column sums over all L * B rows after the loop (the model's job).
// dh [B, H] is read at entry (dLoss/dh_{t_end - 1}) and overwritten at exit with
// dLoss/dh_{t_begin - 1} (at t_begin = 0: the gradient of the zero initial state).
//
// Shapes: xt [L, B, F], z [L, B, U], cell [L, B, cell_width], heads_weight = Wheads
// [heads * H, U], recurrent_weight = Wh [U, H] (both as stored: the unit read is the fastest
// index), w_tau, A [H] (pure; null otherwise). A block owns kCfcRowsPerBlock rows; every sum runs
// in a fixed order: deterministic, no atomics. Outputs must not alias inputs.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/models/cfc/cfc_step_shape.h"

namespace resident::kernels::cfc {

struct CfcBackwardWeights {
  const float* heads_weight = nullptr;      // [heads * H, U]
  const float* recurrent_weight = nullptr;  // [U, H]
  const float* w_tau = nullptr;             // [H], pure only
  const float* A = nullptr;                 // [H], pure only
};

struct CfcBackwardOutputs {
  float* dg = nullptr;  // [L, B, heads * H]
  float* dp = nullptr;  // [L, B, U]
  float* qa = nullptr;  // [L, B, H], pure only
  float* qw = nullptr;  // [L, B, H], pure only
  float* dh = nullptr;  // [B, H], read and overwritten
};

void launch_cfc_backward_steps(const CfcBackwardOutputs& out, const float* z, const float* cell,
                               const float* xt, const CfcBackwardWeights& weights,
                               const CfcStepShape& shape, int t_begin, int t_end,
                               cudaStream_t stream);

}  // namespace resident::kernels::cfc
