// Initial parameters of the KAN model (MODELS.md section 4, efficient-kan's reset_parameters),
// made on the host in double from one seeded std::mt19937_64 and stored as float. Setup only.
//
// Per layer, in layer order and in this draw order:
//   base_weight   [out, in]      kaiming_uniform(a = sqrt(5)): U[-1/sqrt(in), 1/sqrt(in)]
//                                (nn::Initializer::kaiming_uniform(gain sqrt(1/3)))
//   spline_weight [out, in, nb]  noise n[j, i, o] = (U[0, 1) - 1/2) * 0.1 / G at the G + 1
//                                grid points x_j = grid_min + j h (drawn j-major, then i, then
//                                o), fitted by least squares: W[o, i, :] = P n[:, i, o], with P [nb, G + 1]
//                                the minimum-norm pseudo-inverse of the collocation matrix
//                                C[j, m] = B_m(x_j) (kan_spline_fit_matrix), so the spline
//                                sum_m W[o, i, m] B_m(x_j) equals the noise at every grid point
//   spline_scaler [out, in]      kaiming_uniform(a = sqrt(5)), like base_weight
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lib/models/kan/kan_config.h"

namespace resident::models {

// B_m(x) for m < G + k at the grid of `config` (double; the uniform local recursion of
// kernels/models/kan/kan_bases.cuh).
std::vector<double> kan_bases_at(const KanConfig& config, double x);

// P [nb, G + 1] row-major: P = C^T (C C^T)^-1 for the collocation matrix C [G + 1, nb] above.
// Throws resident::Error when C C^T is singular (it is not for a valid config).
std::vector<double> kan_spline_fit_matrix(const KanConfig& config);

struct KanLayerInit {
  std::vector<float> base_weight, spline_weight, spline_scaler;
};

// The initial values of every layer for widths [in, hidden..., out] (kan_layer_widths).
std::vector<KanLayerInit> kan_initial_values(const KanConfig& config,
                                             const std::vector<std::size_t>& widths,
                                             std::uint64_t seed);

}  // namespace resident::models
