// The fused per-variable GRN kernels of TFT (kernels/models/tft/tft_variable_grn.h) run on the
// host: their block programs (tft_variable_grn.cuh, the code the GPU runs) executed phase by
// phase by HostBlock over the whole grid, in fp32, shared memory NaN-poisoned before each block,
// then the reduction element by element. Compared with a plain double implementation of GRN_j
// written here from the definition (tests/reference/tft_reference.h; its own backward checked
// against central finite differences below), over several 256-row chunks and a partial last
// sub-tile, F >= 3, at the model's default H 32, d_c 8, at an odd H 13, d_c 5 (remainder loops,
// clamped tiles) and at the largest H 64, d_c 64:
//   - xhat [rows, F, H] (poisoned NaN before the forward);
//   - de [rows, F, dc]: what the backward added to a random start (it accumulates);
//   - every per-variable parameter gradient: what the backward added to a random start.
// Tolerance |got - want| <= atol + rtol |want| with rtol 1e-4, atol 1e-5 (fp32 sums of at most
// 600 rows and 128 products against double; 50 times tighter than the GPU model test's).
// Negative controls: one gradient element moved by 10 tolerances, and a reference with the GLU's
// halves swapped, must each fail the same comparison. Also: the launchers refuse sizes out of
// range naming the value and the range, and TftConfig's switch is off by default and named by
// describe() when on.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/models/tft/tft_variable_grn.cuh"
#include "lib/models/tft/tft_config.h"
#include "tests/models/support/agreement.h"
#include "tests/support/host_grid.h"

namespace {

namespace kt = resident::kernels::tft;

constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-5;
constexpr double kEps = 1e-5;  // the model's LayerNorm epsilon (tft_reference.h kTftNormEps)

struct Dims {
  int rows, features, hidden, prescale;
};

// The 8 per-variable tensors in the slab's order, each [F, size].
constexpr int kTensors = 8;
const std::array<const char*, kTensors> kNames = {"fc1.weight", "fc1.bias",  "fc2.weight",
                                                  "fc2.bias",   "glu.weight", "glu.bias",
                                                  "skip.weight", "skip.bias"};
std::array<int, kTensors> tensor_sizes(int H, int dc) {
  return {H * dc, H, H * H, H, 2 * H * H, 2 * H, H * dc, H};
}

template <class T>
using Tensors = std::array<std::vector<T>, kTensors>;

struct Inputs {
  std::vector<float> e, dxhat, de0;
  Tensors<float> params, grads0;
};

std::vector<float> uniform(std::size_t n, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(u(rng));
  return v;
}

Inputs make_inputs(const Dims& d, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto R = static_cast<std::size_t>(d.rows), F = static_cast<std::size_t>(d.features);
  Inputs in;
  in.e = uniform(R * F * d.prescale, -1.5, 1.5, rng);
  in.dxhat = uniform(R * F * d.hidden, -1.0, 1.0, rng);
  in.de0 = uniform(R * F * d.prescale, -1.0, 1.0, rng);
  const std::array<int, kTensors> sizes = tensor_sizes(d.hidden, d.prescale);
  for (int t = 0; t < kTensors; ++t) {
    // Weights U(-1.5/sqrt(fan_in), +): z1 and the gate take both signs (both ELU branches).
    const int fan_in = (t == 0 || t == 6) ? d.prescale : d.hidden;
    const double bound = 1.5 / std::sqrt(static_cast<double>(fan_in));
    in.params[t] = uniform(F * sizes[t], -bound, bound, rng);
    in.grads0[t] = uniform(F * sizes[t], -1.0, 1.0, rng);
  }
  return in;
}

// ----- the kernels' programs on the host

template <class Body>
void emulate_grid(long long blocks, int threads, long long smem_floats, Body body) {
  resident::test::emulate_host_grid<kt::HostBlock>(blocks, threads, smem_floats, body);
}

struct Outputs {
  std::vector<float> xhat, de;
  Tensors<float> grads;
};

kt::VgrnWeights weights_of(const Tensors<float>& p) {
  return {p[0].data(), p[1].data(), p[2].data(), p[3].data(),
          p[4].data(), p[5].data(), p[6].data(), p[7].data()};
}

Outputs run_fused(const Dims& d, const Inputs& in) {
  const long long rows = d.rows;
  const int F = d.features, H = d.hidden, dc = d.prescale;
  const kt::VgrnLayout l = kt::vgrn_layout(H, dc);
  const long long chunks = kt::vgrn_chunks(rows);
  Outputs out;
  out.xhat.assign(static_cast<std::size_t>(rows) * F * H, std::numeric_limits<float>::quiet_NaN());
  out.de = in.de0;
  out.grads = in.grads0;
  const kt::VgrnWeights w = weights_of(in.params);

  const kt::VgrnSizes size{rows, F, H, dc, static_cast<float>(kEps)};
  const kt::VgrnForwardArgs fa{out.xhat.data(), in.e.data(), w, size};
  emulate_grid(chunks * F, kt::kVgrnRows, kt::vgrn_forward_shared_floats(H, dc),
               [&](kt::HostBlock& b, float* s) { kt::vgrn_forward_block(b, fa, s); });

  std::vector<float> partials(static_cast<std::size_t>(chunks) * F * l.params,
                              std::numeric_limits<float>::quiet_NaN());
  const kt::VgrnBackwardArgs ba{out.de.data(), partials.data(), in.dxhat.data(), in.e.data(), w,
                                size};
  emulate_grid(chunks * F, kt::kVgrnRows, kt::vgrn_backward_shared_floats(H, dc),
               [&](kt::HostBlock& b, float* s) { kt::vgrn_backward_block(b, ba, s); });
  Tensors<float>& g = out.grads;
  const kt::VgrnReduceArgs ra{{g[0].data(), g[1].data(), g[2].data(), g[3].data(), g[4].data(),
                               g[5].data(), g[6].data(), g[7].data()},
                              partials.data(),
                              chunks,
                              F,
                              H,
                              dc};
  for (long long i = 0; i < static_cast<long long>(F) * l.params; ++i)
    kt::vgrn_reduce_element(ra, l, i);
  return out;
}

// ----- the double definition (written from tft_reference.h's GRN, not from the kernels)

struct Reference {
  std::vector<double> xhat, de;  // de: the added part only
  Tensors<double> grads;         // the sums over rows only
};

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// One row of one variable. p: the 8 tensors at variable j; dxh may be null (forward only).
// swap_glu: the negative control's wrong gate order.
struct RowResult {
  std::vector<double> xhat, de;
};
RowResult reference_row(int H, int dc, const std::array<const float*, kTensors>& p,
                        const float* e, const float* dxh, const std::array<double*, kTensors>& g,
                        bool swap_glu) {
  const float *w1 = p[0], *b1 = p[1], *w2 = p[2], *b2 = p[3], *wg = p[4], *bg = p[5];
  const float *ws = p[6], *bs = p[7];
  std::vector<double> z1(H), eta2(H), eta1(H), gl(2 * H), r(H), xhat(H);
  for (int k = 0; k < H; ++k) {
    double s = b1[k];
    for (int c = 0; c < dc; ++c) s += static_cast<double>(w1[k * dc + c]) * e[c];
    z1[k] = s;
    eta2[k] = s > 0.0 ? s : std::expm1(s);
  }
  for (int k = 0; k < H; ++k) {
    double s = b2[k];
    for (int i = 0; i < H; ++i) s += static_cast<double>(w2[k * H + i]) * eta2[i];
    eta1[k] = s;
  }
  for (int m = 0; m < 2 * H; ++m) {
    double s = bg[m];
    for (int i = 0; i < H; ++i) s += static_cast<double>(wg[m * H + i]) * eta1[i];
    gl[m] = s;
  }
  const int va = swap_glu ? H : 0, ga = swap_glu ? 0 : H;  // value and gate halves
  double mean = 0.0;
  for (int k = 0; k < H; ++k) {
    double s = bs[k];
    for (int c = 0; c < dc; ++c) s += static_cast<double>(ws[k * dc + c]) * e[c];
    r[k] = s + gl[va + k] * sigmoid(gl[ga + k]);
    mean += r[k];
  }
  mean /= H;
  double var = 0.0;
  for (int k = 0; k < H; ++k) var += (r[k] - mean) * (r[k] - mean);
  var /= H;
  const double rstd = 1.0 / std::sqrt(var + kEps);
  for (int k = 0; k < H; ++k) xhat[k] = (r[k] - mean) * rstd;
  RowResult out{xhat, std::vector<double>(dc, 0.0)};
  if (dxh == nullptr) return out;

  double mg = 0.0, mgx = 0.0;
  for (int k = 0; k < H; ++k) {
    mg += dxh[k];
    mgx += dxh[k] * xhat[k];
  }
  mg /= H;
  mgx /= H;
  std::vector<double> dr(H), dgl(2 * H), deta1(H, 0.0), dz1(H, 0.0);
  for (int k = 0; k < H; ++k) dr[k] = rstd * (dxh[k] - mg - xhat[k] * mgx);
  double *gw1 = g[0], *gb1 = g[1], *gw2 = g[2], *gb2 = g[3], *gwg = g[4], *gbg = g[5];
  double *gws = g[6], *gbs = g[7];
  for (int k = 0; k < H; ++k) {
    gbs[k] += dr[k];
    for (int c = 0; c < dc; ++c) {
      gws[k * dc + c] += dr[k] * e[c];
      out.de[c] += static_cast<double>(ws[k * dc + c]) * dr[k];
    }
    const double s = sigmoid(gl[ga + k]);
    dgl[va + k] = dr[k] * s;
    dgl[ga + k] = dr[k] * gl[va + k] * s * (1.0 - s);
  }
  for (int m = 0; m < 2 * H; ++m) {
    gbg[m] += dgl[m];
    for (int i = 0; i < H; ++i) {
      gwg[m * H + i] += dgl[m] * eta1[i];
      deta1[i] += static_cast<double>(wg[m * H + i]) * dgl[m];
    }
  }
  for (int k = 0; k < H; ++k) {
    gb2[k] += deta1[k];
    for (int i = 0; i < H; ++i) {
      gw2[k * H + i] += deta1[k] * eta2[i];
      dz1[i] += static_cast<double>(w2[k * H + i]) * deta1[k];
    }
  }
  for (int k = 0; k < H; ++k) dz1[k] *= z1[k] > 0.0 ? 1.0 : std::exp(z1[k]);
  for (int k = 0; k < H; ++k) {
    gb1[k] += dz1[k];
    for (int c = 0; c < dc; ++c) {
      gw1[k * dc + c] += dz1[k] * e[c];
      out.de[c] += static_cast<double>(w1[k * dc + c]) * dz1[k];
    }
  }
  return out;
}

Reference run_reference(const Dims& d, const Inputs& in, bool swap_glu = false) {
  const int F = d.features, H = d.hidden, dc = d.prescale;
  const std::array<int, kTensors> sizes = tensor_sizes(H, dc);
  Reference ref;
  ref.xhat.assign(static_cast<std::size_t>(d.rows) * F * H, 0.0);
  ref.de.assign(static_cast<std::size_t>(d.rows) * F * dc, 0.0);
  for (int t = 0; t < kTensors; ++t) ref.grads[t].assign(in.params[t].size(), 0.0);
  for (int n = 0; n < d.rows; ++n)
    for (int j = 0; j < F; ++j) {
      std::array<const float*, kTensors> p;
      std::array<double*, kTensors> g;
      for (int t = 0; t < kTensors; ++t) {
        p[t] = in.params[t].data() + static_cast<std::size_t>(j) * sizes[t];
        g[t] = ref.grads[t].data() + static_cast<std::size_t>(j) * sizes[t];
      }
      const std::size_t row = static_cast<std::size_t>(n) * F + j;
      const RowResult r = reference_row(H, dc, p, in.e.data() + row * dc,
                                        in.dxhat.data() + row * H, g, swap_glu);
      for (int k = 0; k < H; ++k) ref.xhat[row * H + k] = r.xhat[k];
      for (int c = 0; c < dc; ++c) ref.de[row * dc + c] = r.de[c];
    }
  return ref;
}

// ----- comparison

using resident::test::Agreement;

// got[i] - base[i] (base may be empty: 0) against want[i].
Agreement agreement(const std::vector<float>& got, const std::vector<float>& base,
                    const std::vector<double>& want) {
  std::vector<double> added(got.begin(), got.end());
  for (std::size_t i = 0; i < base.size(); ++i) added[i] -= base[i];
  return resident::test::agreement(added, want, kRtol, kAtol);
}

void expect_agrees(const std::string& what, const std::vector<float>& got,
                   const std::vector<float>& base, const std::vector<double>& want) {
  const Agreement a = agreement(got, base, want);
  std::printf("  %-20s max |err| %.3e  share of tolerance %.3f (rtol %.0e, atol %.0e)\n",
              what.c_str(), a.max_abs, a.share, kRtol, kAtol);
  EXPECT_LE(a.share, 1.0) << what << " element " << a.worst << ": got "
                          << static_cast<double>(got[a.worst]) -
                                 (base.empty() ? 0.0 : base[a.worst])
                          << ", want " << want[a.worst];
}

void check_case(const Dims& d, std::uint64_t seed) {
  std::printf("H %d, d_c %d, F %d, rows %d (%lld chunks of %d rows):\n", d.hidden, d.prescale,
              d.features, d.rows, static_cast<long long>(kt::vgrn_chunks(d.rows)),
              kt::kVgrnChunkRows);
  const Inputs in = make_inputs(d, seed);
  const Outputs got = run_fused(d, in);
  const Reference want = run_reference(d, in);
  expect_agrees("xhat", got.xhat, {}, want.xhat);
  expect_agrees("de (added)", got.de, in.de0, want.de);
  for (int t = 0; t < kTensors; ++t)
    expect_agrees(std::string("vsn_var.") + kNames[t], got.grads[t], in.grads0[t],
                  want.grads[t]);
}

TEST(TftVariableGrnEmulation, DefaultWidths) { check_case({600, 3, 32, 8}, 11); }

TEST(TftVariableGrnEmulation, OddWidths) { check_case({300, 4, 13, 5}, 12); }

TEST(TftVariableGrnEmulation, LargestWidths) { check_case({70, 3, 64, 64}, 13); }

TEST(TftVariableGrnEmulation, OneRowOneVariable) { check_case({1, 1, 2, 1}, 14); }

// A comparison that cannot fail proves nothing: a gradient moved by 10 tolerances at one element
// and a reference with the GLU's value and gate halves swapped must both be rejected.
TEST(TftVariableGrnEmulation, NegativeControlsFail) {
  const Dims d{300, 3, 32, 8};
  const Inputs in = make_inputs(d, 21);
  const Outputs got = run_fused(d, in);
  const Reference want = run_reference(d, in);
  for (int t : {0, 4, 7}) {
    std::vector<float> moved = got.grads[t];
    const std::size_t at = moved.size() / 3;
    const double wanted = want.grads[t][at];
    moved[at] = static_cast<float>(in.grads0[t][at] + wanted +
                                   10.0 * (kAtol + kRtol * std::fabs(wanted)));
    EXPECT_LE(agreement(got.grads[t], in.grads0[t], want.grads[t]).share, 1.0);
    const Agreement a = agreement(moved, in.grads0[t], want.grads[t]);
    std::printf("  moved %-14s share %.3f at element %zu (must be > 1)\n", kNames[t], a.share,
                a.worst);
    EXPECT_GT(a.share, 1.0) << kNames[t];
  }
  const Reference swapped = run_reference(d, in, true);
  const Agreement a = agreement(got.xhat, {}, swapped.xhat);
  std::printf("  xhat against a swapped-GLU reference: share %.3f (must be > 1)\n", a.share);
  EXPECT_GT(a.share, 1.0);
}

// The double definition's backward against central differences of L = sum dxhat * xhat.
TEST(TftVariableGrnEmulation, ReferenceBackwardMatchesFiniteDifferences) {
  const Dims d{3, 2, 5, 3};
  Inputs in = make_inputs(d, 31);
  const Reference want = run_reference(d, in);
  const auto loss = [&](const Inputs& x) {
    const Reference r = run_reference(d, x);
    double s = 0.0;
    for (std::size_t i = 0; i < r.xhat.size(); ++i) s += x.dxhat[i] * r.xhat[i];
    return s;
  };
  // Steps in float parameters: h large enough that the float perturbation is exact enough.
  const double h = 1e-3;
  double worst = 0.0;
  for (int t = 0; t < kTensors; ++t)
    for (std::size_t i = 0; i < in.params[t].size(); i += 3) {
      const float keep = in.params[t][i];
      in.params[t][i] = static_cast<float>(keep + h);
      const double up = loss(in);
      const double dh_up = static_cast<double>(in.params[t][i]) - keep;
      in.params[t][i] = static_cast<float>(keep - h);
      const double down = loss(in);
      const double dh_down = keep - static_cast<double>(in.params[t][i]);
      in.params[t][i] = keep;
      const double fd = (up - down) / (dh_up + dh_down);
      const double err = std::fabs(fd - want.grads[t][i]) / (1e-4 + 1e-3 * std::fabs(fd));
      worst = std::max(worst, err);
      EXPECT_LE(err, 1.0) << kNames[t] << "[" << i << "]: fd " << fd << ", backward "
                          << want.grads[t][i];
    }
  for (std::size_t i = 0; i < in.e.size(); ++i) {
    const float keep = in.e[i];
    in.e[i] = static_cast<float>(keep + h);
    const double up = loss(in);
    const double dh_up = static_cast<double>(in.e[i]) - keep;
    in.e[i] = static_cast<float>(keep - h);
    const double down = loss(in);
    const double dh_down = keep - static_cast<double>(in.e[i]);
    in.e[i] = keep;
    const double fd = (up - down) / (dh_up + dh_down);
    const double err = std::fabs(fd - want.de[i]) / (1e-4 + 1e-3 * std::fabs(fd));
    worst = std::max(worst, err);
    EXPECT_LE(err, 1.0) << "e[" << i << "]: fd " << fd << ", backward " << want.de[i];
  }
  std::printf("  reference backward vs central differences: worst share %.3f (rtol 1e-3, "
              "atol 1e-4)\n",
              worst);
}

// Sizes outside the kernels' ranges are refused with the value and the range.
TEST(TftVariableGrnEmulation, LaunchersRefuseSizesOutOfRange) {
  const auto message = [](std::size_t rows, std::size_t f, std::size_t h, std::size_t dc) {
    try {
      kt::check_variable_grn_sizes("test", rows, f, h, dc);
    } catch (const resident::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message(16384, 32, 32, 8), "");
  EXPECT_NE(message(16384, 32, 65, 8).find("hidden = 65, allowed [1, 64]"), std::string::npos);
  EXPECT_NE(message(16384, 32, 32, 0).find("prescale = 0, allowed [1, 64]"), std::string::npos);
  EXPECT_NE(message(16384, 32, 32, 65).find("prescale = 65, allowed [1, 64]"), std::string::npos);
  EXPECT_NE(message(0, 32, 32, 8).find("rows = 0"), std::string::npos);
  EXPECT_THROW((void)kt::variable_grn_partials_floats(10, 3, 0, 8), resident::Error);
  const kt::VgrnLayout l = kt::vgrn_layout(32, 8);
  EXPECT_EQ(l.params, 2 * 32 * 8 + 3 * 32 * 32 + 5 * 32);
  EXPECT_EQ(kt::variable_grn_partials_floats(16384, 32, 32, 8),
            static_cast<std::size_t>(64) * 32 * l.params);
  // The largest widths fit an H100's 227 KB of shared memory a block.
  EXPECT_LE(kt::vgrn_backward_shared_floats(64, 64) * 4, 227 * 1024);
}

}  // namespace

namespace {

// The switch: off by default; describe() (part of a checkpoint's fingerprint) names it when on
// and is unchanged when off.
TEST(TftVariableGrnEmulation, ConfigSwitchIsOffByDefaultAndDescribed) {
  using resident::models::TftConfig;
  const resident::models::ModelShape shape{64, 32, 1, 256};
  TftConfig c;
  EXPECT_FALSE(c.fused_variable_grns);
  EXPECT_EQ(resident::models::describe_tft(c, shape),
            "tft: H 32, 4 heads, d_c 8, quantiles [0.1, 0.5, 0.9], L 64, F 32, 1 outputs");
  c.fused_variable_grns = true;
  EXPECT_NO_THROW(resident::models::validate_tft_config(c, shape));
  EXPECT_EQ(resident::models::describe_tft(c, shape),
            "tft: H 32, 4 heads, d_c 8, quantiles [0.1, 0.5, 0.9], L 64, F 32, 1 outputs, fused "
            "variable GRNs");
}

}  // namespace
