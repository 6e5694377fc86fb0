// Agreement of GPU values with a double reference, and its printed line, for the model GPU tests.
// Contracts:
//   - agreement(got, want, rtol, atol) over the first want.size() elements (got must hold at
//     least as many): share = |got - want| / (atol + rtol |want|), the worst share, its index and
//     the largest |got - want|; a non-finite got counts as an infinite error, so a NaN left by a
//     skipped write (the tests poison outputs before a run) fails. share <= 1 passes.
//   - print_agreement(what, a, rtol, atol, width): one line
//     "  <what, left-aligned in width> max |err| ...  share of tolerance ... (rtol .., atol ..)";
//     each test passes the width it has always printed with (its log stays comparable).
//   - expect_agreement: print_agreement, then EXPECT share <= 1 naming what and the worst element.
//   - expect_gradient_agrees(name, grads_added, slab, want, ...): the tensor `name` of a whole-slab
//     vector (grads_added: the slab's gradients after the backward minus their random start, so
//     what the backward added) against the reference's gradient `want`; prints the line under
//     name and EXPECTs share <= 1 naming the element and both values.
//   - slab_tensor(flat, slab, name, size): elements [offset, offset + size) of the tensor `name`
//     of a whole-slab vector (a download of one SlabPart).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "lib/nn/param_slab.h"

namespace resident::test {

struct Agreement {
  double max_abs = 0.0;
  double share = 0.0;  // of the tolerance, worst element
  std::size_t worst = 0;
};

template <class A, class B>
Agreement agreement(const A& got, const B& want, double rtol, double atol) {
  Agreement r;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    const double err = std::isfinite(g) ? std::fabs(g - w) : INFINITY;
    const double share = err / (atol + rtol * std::fabs(w));
    r.max_abs = std::max(r.max_abs, err);
    if (!(share <= r.share)) {
      r.share = share;
      r.worst = i;
    }
  }
  return r;
}

inline void print_agreement(const std::string& what, const Agreement& a, double rtol,
                            double atol, int width) {
  std::printf("  %-*s max |err| %.3e  share of tolerance %.3f (rtol %.0e, atol %.0e)\n", width,
              what.c_str(), a.max_abs, a.share, rtol, atol);
}

inline void expect_agreement(const std::string& what, const Agreement& a, double rtol,
                             double atol, int width) {
  print_agreement(what, a, rtol, atol, width);
  EXPECT_LE(a.share, 1.0) << what << ": worst element " << a.worst;
}

inline std::vector<float> slab_tensor(const std::vector<float>& flat, const nn::ParamSlab& slab,
                                      const std::string& name, std::size_t size) {
  const std::size_t offset = slab.layout().tensor(name).offset;
  return {flat.begin() + static_cast<std::ptrdiff_t>(offset),
          flat.begin() + static_cast<std::ptrdiff_t>(offset + size)};
}

inline void expect_gradient_agrees(const std::string& name, const std::vector<float>& grads_added,
                                   const nn::ParamSlab& slab, const std::vector<double>& want,
                                   double rtol, double atol, int width) {
  const std::vector<float> got = slab_tensor(grads_added, slab, name, want.size());
  const Agreement a = agreement(got, want, rtol, atol);
  print_agreement(name, a, rtol, atol, width);
  EXPECT_LE(a.share, 1.0) << name << " element " << a.worst << ": gpu " << got[a.worst]
                          << ", reference " << want[a.worst];
}

}  // namespace resident::test
