// CPU test (no GPU) of the device functions the KAN kernels evaluate (kernels/models/kan/
// kan_bases.cuh, host-callable): the fp32 local B-spline recursion and its derivative against the
// double reference's Cox-de Boor recursion (tests/reference/kan_reference.h) for every order the
// kernels are instantiated for, inside and outside the knot range, and silu / silu' against
// double. Tolerance: 4e-6 absolute on the bases (each <= 1), 4e-6 / h on their derivatives
// (each <= k / h), 1e-6 relative on silu and 1e-6 absolute on silu' (which crosses 0).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/models/kan/kan_bases.cuh"
#include "tests/reference/kan_reference.h"

namespace {

namespace kan = resident::kernels::kan;
namespace ref = resident::reference;

struct GridCase {
  int grid_size;
  float grid_min, grid_max;
};
constexpr GridCase kGrids[] = {
    {5, -1.0f, 1.0f}, {7, -2.0f, 1.5f}, {1, -1.0f, 1.0f}, {32, -1.0f, 1.0f}};

template <int kOrder>
void check_order(const GridCase& c) {
  kan::Grid grid;
  grid.grid_min = c.grid_min;
  grid.inv_h = static_cast<float>(c.grid_size / (static_cast<double>(c.grid_max) - c.grid_min));
  grid.grid_size = c.grid_size;
  grid.order = kOrder;
  const ref::KanSpec spec{
      {1, 1}, static_cast<std::size_t>(c.grid_size), kOrder, c.grid_min, c.grid_max};
  const std::vector<double> knots = ref::kan_knots(spec);
  const int nb = c.grid_size + kOrder;
  const double h = (static_cast<double>(c.grid_max) - c.grid_min) / c.grid_size;
  std::mt19937_64 rng(static_cast<std::uint64_t>(kOrder * 100 + c.grid_size));
  std::uniform_real_distribution<float> point(static_cast<float>(knots.front() - 0.2),
                                              static_cast<float>(knots.back() + 0.2));
  double worst_value = 0.0, worst_derivative = 0.0;
  for (int trial = 0; trial < 2000; ++trial) {
    const float u = trial == 0 ? c.grid_min : trial == 1 ? c.grid_max : point(rng);
    float value[kOrder + 1], derivative[kOrder + 1];
    const int first = kan::local_bases<kOrder>(u, grid, value, &derivative);
    std::vector<double> got(nb, 0.0), got_d(nb, 0.0);
    for (int r = 0; r <= kOrder; ++r)
      if (first + r >= 0 && first + r < nb) {
        got[first + r] = value[r];
        got_d[first + r] = derivative[r];
      }
    const std::vector<double> want = ref::bspline_bases(spec, u);
    const std::vector<double> want_d = ref::bspline_basis_derivatives(spec, u);
    for (int m = 0; m < nb; ++m) {
      worst_value = std::max(worst_value, std::fabs(got[m] - want[m]));
      worst_derivative = std::max(worst_derivative, std::fabs(got_d[m] - want_d[m]) * h);
    }
  }
  std::printf(
      "    G %2d, k %d on [%g, %g]: max |B - ref| %.2e (%5.1f%%), max h |B' - ref| %.2e "
      "(%5.1f%%)\n",
      c.grid_size, kOrder, c.grid_min, c.grid_max, worst_value, 100.0 * worst_value / 4e-6,
      worst_derivative, 100.0 * worst_derivative / 4e-6);
  EXPECT_LE(worst_value, 4e-6);
  EXPECT_LE(worst_derivative, 4e-6);
}

TEST(KanBases, Fp32LocalRecursionMatchesTheReference) {
  for (const GridCase& c : kGrids) {
    check_order<1>(c);
    check_order<2>(c);
    check_order<3>(c);
    check_order<4>(c);
    check_order<5>(c);
  }
}

TEST(KanBases, SiluAndItsDerivativeMatchDouble) {
  double worst = 0.0, worst_d = 0.0;
  for (float u = -20.0f; u <= 20.0f; u += 0.01f) {
    const double d = u, s = 1.0 / (1.0 + std::exp(-d));
    const double want = d * s, want_d = s * (1.0 + d * (1.0 - s));
    worst = std::max(worst, std::fabs(kan::silu(u) - want) / std::max(1e-30, std::fabs(want)));
    worst_d = std::max(worst_d, std::fabs(kan::silu_derivative(u) - want_d));
  }
  std::printf(
      "    silu: max relative error %.2e (%5.1f%% of 1e-6); silu': max error %.2e "
      "(%5.1f%% of 1e-6)\n",
      worst, 100.0 * worst / 1e-6, worst_d, 100.0 * worst_d / 1e-6);
  EXPECT_LE(worst, 1e-6);
  EXPECT_LE(worst_d, 1e-6);  // absolute: silu' has a zero near u = -1.28 (|silu'| <= 1.1)
}

}  // namespace
