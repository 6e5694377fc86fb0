// Plain C++ double-precision forward and backward of the KAN supervised model (MODELS.md section
// 4, efficient-kan's layer): the oracle of the GPU KAN tests. Written for clarity, not speed; the
// backward is checked against central finite differences (tests/models/kan/kan_reference_test.cpp).
//
// Model. widths = [in, hidden..., out]; layer l maps a_l [batch, widths[l]] to
// a_{l+1} [batch, widths[l+1]], a_0 = the input, the last a the prediction:
//   u     = mid + half * tanh(a)                 (squash into the grid; mid, half of the range)
//   y[o]  = sum_i base_weight[o, i] * silu(u_i)
//         + sum_i sum_m spline_weight[o, i, m] * spline_scaler[o, i] * B_m(u_i)
// silu(u) = u / (1 + e^-u); B_m (m < G + k) the order-k B-spline bases of the grid below.
//
// Grid (pykan's extend_grid): G intervals on [grid_min, grid_max], h = (grid_max - grid_min) / G,
// knots t_m = grid_min + (m - k) h for m = 0..G+2k. Bases by the Cox-de Boor recursion:
//   B_{m,0}(x) = 1[t_m <= x < t_{m+1}]
//   B_{m,p}(x) = (x - t_m) / (t_{m+p} - t_m) B_{m,p-1}(x)
//              + (t_{m+p+1} - x) / (t_{m+p+1} - t_{m+1}) B_{m+1,p-1}(x)
//   B'_{m,k}(x) = k / (t_{m+k} - t_m) B_{m,k-1}(x) - k / (t_{m+k+1} - t_{m+1}) B_{m+1,k-1}(x)
// They sum to 1 on [grid_min, grid_max] and vanish outside [t_0, t_{G+2k}).
//
// Flat parameter layout (kan_parameter_offsets): per layer, in order,
//   base_weight [out, in], spline_weight [out, in, G + k], spline_scaler [out, in].
// Conventions of nn_reference.h: row-major flat spans, sizes checked (resident::Error), a backward
// writes each gradient element once as GradMode says, an empty gradient span is not computed.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "tests/reference/nn_reference.h"

namespace resident::reference {

struct KanSpec {
  std::vector<std::size_t> widths;  // [in, hidden..., out]: >= 2 entries, each >= 1
  std::size_t grid_size = 5;        // G >= 1
  std::size_t spline_order = 3;     // k >= 1
  double grid_min = -1.0;           // finite, grid_min < grid_max
  double grid_max = 1.0;
};

// Throws resident::Error naming the field when `spec` is out of the ranges above.
void validate_kan_spec(const KanSpec& spec);

// G + k.
std::size_t kan_basis_count(const KanSpec& spec);
// The G + 2k + 1 knots t_m.
std::vector<double> kan_knots(const KanSpec& spec);
// B_{m,k}(x) for m < G + k, by the recursion above.
std::vector<double> bspline_bases(const KanSpec& spec, double x);
// B'_{m,k}(x) for m < G + k.
std::vector<double> bspline_basis_derivatives(const KanSpec& spec, double x);

// Offsets of layer l's tensors in the flat parameter vector.
struct KanLayerOffsets {
  std::size_t base_weight = 0;
  std::size_t spline_weight = 0;
  std::size_t spline_scaler = 0;
};
std::vector<KanLayerOffsets> kan_parameter_offsets(const KanSpec& spec);
std::size_t kan_parameter_count(const KanSpec& spec);

// x [batch, widths.front()], params [kan_parameter_count]. Returns [batch, widths.back()].
std::vector<double> kan_forward(const KanSpec& spec, std::size_t batch,
                                std::span<const double> params, std::span<const double> x);

struct KanGrads {
  std::span<double> dx;       // [batch, widths.front()] or empty
  std::span<double> dparams;  // [kan_parameter_count] or empty
};

// The vector-Jacobian product of kan_forward at (params, x) for dy [batch, widths.back()].
void kan_backward(const KanSpec& spec, std::size_t batch, std::span<const double> params,
                  std::span<const double> x, std::span<const double> dy, KanGrads grads,
                  GradMode mode);

}  // namespace resident::reference
