// Plain descriptions of the KAN model's grid and layers that its launchers take (kernels/models/
// kan/*.h). Host and device see the same bytes: they are passed to kernels by value.
//
// A KAN layer with `in` inputs, `out` outputs and nb = G + k bases per input keeps its operand and
// its combined weight with the SiLU part first and the spline part after it:
//   operand   [rows, K]: columns [0, in) silu(u_i), column in + i * nb + m the basis B_m(u_i)
//   combined  [out, K]:  columns [0, in) base_weight[o, i], column in + i * nb + m
//                        spline_weight[o, i, m] * spline_scaler[o, i]
// with K = in * (1 + nb), so the layer is the one GEMM y = operand combined^T.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::kan {

// Largest layer count one launch over all layers takes.
inline constexpr int kMaxLayers = 8;
// Largest spline order the kernels are instantiated for.
inline constexpr int kMaxSplineOrder = 5;
// Largest grid size (G) the operand kernel's shared-memory tile is sized for.
inline constexpr int kMaxGridSize = 32;

// The grid and the squash u = mid + half * tanh(a) that maps an input into it.
struct Grid {
  float grid_min = -1.0f;  // lo; the knots are t_m = lo + (m - k) h
  float inv_h = 2.5f;      // 1 / h = G / (hi - lo)
  float mid = 0.0f;        // (lo + hi) / 2
  float half = 1.0f;       // (hi - lo) / 2
  int grid_size = 5;       // G, [1, kMaxGridSize]
  int order = 3;           // k, [1, kMaxSplineOrder]
  __host__ __device__ int basis_count() const { return grid_size + order; }
};

// One layer's parameter views (slab params or slab grads) and its combined matrix.
struct LayerTensors {
  const float* spline_weight = nullptr;  // [out, in, nb] params (read)
  const float* spline_scaler = nullptr;  // [out, in] params (read)
  const float* base_weight = nullptr;    // [out, in] params (read; combined-weight kernel)
  float* d_base_weight = nullptr;        // [out, in] grads (weight-grad split kernel)
  float* d_spline_weight = nullptr;      // [out, in, nb] grads
  float* d_spline_scaler = nullptr;      // [out, in] grads
  float* combined = nullptr;             // [out, K]: written by the combined-weight kernel
  const float* d_combined = nullptr;     // [out, K]: read by the weight-grad split kernel
  int in = 0;
  int out = 0;
};

struct LayerTable {
  LayerTensors layer[kMaxLayers];
  int count = 0;
};

}  // namespace resident::kernels::kan
