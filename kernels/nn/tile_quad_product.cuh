// The inner loop shared by the fused narrow-MLP kernels (mlp_forward_fused.cuh,
// mlp_backward_fused.cu): a thread's rows of a shared-memory tile times a 4-column quad of a
// shared-memory matrix.
#pragma once

namespace resident::kernels {

// s[m][c] = sum over k = 0 .. count - 1, in order, of fmaf(tile[r_m][k], w[k][4q + c]) for the
// rows r_m = r0 + m * groups (a row >= Rows reads as 0), with tile rows `stride` floats apart and
// w rows `w_stride` floats apart (w + 4q 16-byte aligned). Overwrites s.
template <unsigned RowsPerPass, unsigned Rows>
__device__ inline void tile_quad_product(float (&s)[RowsPerPass][4], const float* tile,
                                         unsigned stride, const float* w, unsigned w_stride,
                                         unsigned count, unsigned r0, unsigned groups,
                                         unsigned q) {
#pragma unroll
  for (unsigned m = 0; m < RowsPerPass; ++m) s[m][0] = s[m][1] = s[m][2] = s[m][3] = 0.0f;
  for (unsigned k = 0; k < count; ++k) {
    const float4 wv = *reinterpret_cast<const float4*>(w + k * w_stride + 4 * q);
#pragma unroll
    for (unsigned m = 0; m < RowsPerPass; ++m) {
      const unsigned r = r0 + m * groups;
      const float a = r < Rows ? tile[r * stride + k] : 0.0f;
      s[m][0] = fmaf(a, wv.x, s[m][0]);
      s[m][1] = fmaf(a, wv.y, s[m][1]);
      s[m][2] = fmaf(a, wv.z, s[m][2]);
      s[m][3] = fmaf(a, wv.w, s[m][3]);
    }
  }
}

}  // namespace resident::kernels
