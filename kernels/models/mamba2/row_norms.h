// The Mamba2 model's two row normalizations (row_norms.cu), each a forward and a backward:
//   residual RMSNorm  h_out = h_in + delta + bias;  u = RMSNorm(h_out) * weight
//   gated RMSNorm     yn = RMSNorm(y * SiLU(z)) * weight   (the mixer's gate before the norm)
// RMSNorm(v) = v * rstd, rstd = 1 / sqrt(mean(v^2) + eps), the mean over each row's `cols`.
//
// Blocks of kNormThreads threads own kNormRowsPerBlock consecutive rows each (grid =
// norm_blocks(rows)); every reduction runs in a fixed order (no atomics), so results depend only
// on the values and the shape. Parameter gradients are not summed over rows here: each block
// writes its rows' column sums into `partial_*` [norm_blocks(rows), cols] (overwritten), which
// the caller reduces in a fixed order (partials_sum.h). Row-major float buffers on the device;
// nothing allocated or synchronized (capturable).
#pragma once

#include <cuda_runtime_api.h>

namespace resident::kernels::mamba2 {

inline constexpr int kNormRowsPerBlock = 32;
inline constexpr int kNormLanes = 8;  // threads per row in the reductions
inline constexpr int kNormThreads = kNormRowsPerBlock * kNormLanes;

inline int norm_blocks(int rows) { return (rows + kNormRowsPerBlock - 1) / kNormRowsPerBlock; }

struct ResidualRmsNormForwardArgs {
  float* h_out = nullptr;         // [rows, cols], overwritten; may alias h_in
  float* u = nullptr;             // [rows, cols], overwritten
  float* rstd = nullptr;          // [rows], overwritten
  const float* h_in = nullptr;    // [rows, cols]
  const float* delta = nullptr;   // [rows, cols] or null
  const float* bias = nullptr;    // [cols] or null
  const float* weight = nullptr;  // [cols]
  int rows = 0;
  int cols = 0;
  float eps = 1e-5f;
};

// With g = du * weight and s = rstd:  dh [rows, cols] += s g - h s^3 mean_row(g h)  (accumulated:
// the residual stream's gradient flows through unchanged), partial_weight[block, c] = sum over
// the block's rows of du h s, and, when partial_dh is non-null, partial_dh[block, c] = sum over
// the block's rows of the updated dh.
struct ResidualRmsNormBackwardArgs {
  float* dh = nullptr;              // [rows, cols], accumulated into
  float* partial_weight = nullptr;  // [norm_blocks(rows), cols], overwritten
  float* partial_dh = nullptr;      // [norm_blocks(rows), cols] or null, overwritten
  const float* du = nullptr;        // [rows, cols]
  const float* h = nullptr;         // [rows, cols], the forward's h_out
  const float* rstd = nullptr;      // [rows]
  const float* weight = nullptr;    // [cols]
  int rows = 0;
  int cols = 0;
};

// z is read with row stride z_stride (a column block of the in_proj output).
struct GatedRmsNormForwardArgs {
  float* yn = nullptr;            // [rows, cols], overwritten
  float* rstd = nullptr;          // [rows], overwritten
  const float* y = nullptr;       // [rows, cols]
  const float* z = nullptr;       // [rows, z_stride], columns [0, cols)
  const float* weight = nullptr;  // [cols]
  int rows = 0;
  int cols = 0;
  int z_stride = 0;
  float eps = 1e-5f;
};

// With g = y SiLU(z), s = rstd, dg = s dyn w - g s^3 mean_row(dyn w g):
//   dy = dg SiLU(z), dz = dg y SiLU'(z) (both overwritten), partial_weight[block, c] = sum over
//   the block's rows of dyn g s.
struct GatedRmsNormBackwardArgs {
  float* dy = nullptr;              // [rows, cols], overwritten
  float* dz = nullptr;              // [rows, dz_stride], columns [0, cols) overwritten
  float* partial_weight = nullptr;  // [norm_blocks(rows), cols], overwritten
  const float* dyn = nullptr;       // [rows, cols]
  const float* y = nullptr;
  const float* z = nullptr;         // row stride z_stride
  const float* rstd = nullptr;
  const float* weight = nullptr;
  int rows = 0;
  int cols = 0;
  int z_stride = 0;
  int dz_stride = 0;
};

void launch_residual_rms_norm_forward(const ResidualRmsNormForwardArgs& args, cudaStream_t stream);
void launch_residual_rms_norm_backward(const ResidualRmsNormBackwardArgs& args,
                                       cudaStream_t stream);
void launch_gated_rms_norm_forward(const GatedRmsNormForwardArgs& args, cudaStream_t stream);
void launch_gated_rms_norm_backward(const GatedRmsNormBackwardArgs& args, cudaStream_t stream);

}  // namespace resident::kernels::mamba2
