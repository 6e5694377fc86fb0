// The double-precision Mamba2 reference (tests/reference/mamba2_reference.h) checked on its own:
// every gradient of the full model (each parameter tensor and the input) against central finite
// differences at tiny configs with random parameters, one chunk and several; the chunked SSD
// against the one-chunk SSD and against the step() recurrence; exponent arguments <= 0 at large
// |A| dt; and Mamba2Config validation messages. CPU only.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "lib/models/mamba2/mamba2_config.h"
#include "tests/models/mamba2/mamba2_test_support.h"
#include "tests/reference/finite_difference.h"
#include "tests/reference/mamba2_reference.h"

namespace {

namespace ref = resident::reference;
namespace tm = resident::test::mamba2;

ref::Mamba2Dims tiny_dims(std::size_t window, std::size_t chunk) {
  ref::Mamba2Dims d;
  d.window = window;
  d.features = 3;
  d.outputs = 2;
  d.d_model = 8;
  d.n_layers = 2;
  d.expand = 2;
  d.headdim = 4;
  d.d_state = 3;
  d.d_conv = 4;
  d.chunk = chunk;
  return d;
}

// Max relative error (floor 1e-3) allowed between the analytic and the central-difference
// gradient; observed values are ~1e-9.
constexpr double kFdTolerance = 1e-6;

void check_full_model_gradients(const ref::Mamba2Dims& dims, std::uint64_t seed) {
  const std::size_t batch = 2;
  std::mt19937_64 rng(seed);
  ref::Mamba2Params params = tm::random_params(dims, rng);
  const std::vector<double> x = tm::random_values(batch * dims.window * dims.features, -1, 1, rng);
  const std::vector<double> upstream = tm::random_values(batch * dims.outputs, -1, 1, rng);

  std::vector<double> packed = ref::mamba2_flatten(params);
  const std::size_t n_params = packed.size();
  packed.insert(packed.end(), x.begin(), x.end());
  const auto f = [&](std::span<const double> v) {
    ref::Mamba2Params p = ref::mamba2_zero_params(dims);
    ref::mamba2_unflatten(v.subspan(0, n_params), p);
    const std::vector<double> pred = ref::mamba2_forward(dims, p, v.subspan(n_params), batch);
    double s = 0.0;
    for (std::size_t i = 0; i < pred.size(); ++i) s += upstream[i] * pred[i];
    return s;
  };
  const std::vector<double> numeric = ref::central_difference_gradient(f, packed, 1e-6);
  const ref::Mamba2Gradients g = ref::mamba2_backward(dims, params, x, batch, upstream);

  std::printf("window %zu chunk %zu:\n", dims.window, dims.chunk);
  std::size_t offset = 0;
  ref::Mamba2Params grads = g.params;
  auto check = [&](const std::string& name, const std::vector<double>& analytic) {
    const std::span<const double> num(numeric.data() + offset, analytic.size());
    const ref::GradientComparison c = ref::compare_gradients(analytic, num, 1e-3);
    std::printf("  %-32s max rel err %.2e (share of tolerance %.4f)\n", name.c_str(),
                c.max_rel_error, c.max_rel_error / kFdTolerance);
    EXPECT_LE(c.max_rel_error, kFdTolerance)
        << name << " element " << c.worst_index << ": analytic " << c.analytic_at_worst
        << ", numeric " << c.numeric_at_worst;
    // A gradient that is identically zero would pass trivially: every tensor must matter.
    double norm = 0.0;
    for (double v : analytic) norm += v * v;
    EXPECT_GT(norm, 1e-12) << name << " has an all-zero gradient";
    offset += analytic.size();
  };
  for (auto& [name, tensor] : ref::mamba2_named_tensors(grads)) check(name, *tensor);
  check("input x", g.dx);
  EXPECT_EQ(offset, numeric.size());
}

TEST(Mamba2Reference, FullModelGradientsOneChunk) { check_full_model_gradients(tiny_dims(5, 64), 11); }
TEST(Mamba2Reference, FullModelGradientsChunk2) { check_full_model_gradients(tiny_dims(5, 2), 12); }
TEST(Mamba2Reference, FullModelGradientsChunk3) { check_full_model_gradients(tiny_dims(6, 3), 13); }

double relative_gap(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(a[i] - b[i]) / std::max(1.0, std::fabs(b[i])));
  return worst;
}

TEST(Mamba2Reference, ChunkedEqualsOneChunk) {
  for (const auto& [window, chunk] : {std::pair<std::size_t, std::size_t>{5, 2}, {5, 3}, {6, 3},
                                     {6, 1}, {7, 4}}) {
    const ref::Mamba2Dims chunked = tiny_dims(window, chunk);
    const ref::Mamba2Dims single = tiny_dims(window, window);
    std::mt19937_64 rng(100 + window * 10 + chunk);
    const ref::Mamba2Params params = tm::random_params(single, rng);
    const std::size_t batch = 2;
    const std::vector<double> x = tm::random_values(batch * window * 3, -1, 1, rng);
    const std::vector<double> up = tm::random_values(batch * 2, -1, 1, rng);
    const double fwd = relative_gap(ref::mamba2_forward(chunked, params, x, batch),
                                    ref::mamba2_forward(single, params, x, batch));
    const ref::Mamba2Gradients gc = ref::mamba2_backward(chunked, params, x, batch, up);
    const ref::Mamba2Gradients gs = ref::mamba2_backward(single, params, x, batch, up);
    const double bwd = std::max(relative_gap(ref::mamba2_flatten(gc.params),
                                             ref::mamba2_flatten(gs.params)),
                                relative_gap(gc.dx, gs.dx));
    std::printf("window %zu chunk %zu vs one chunk: forward gap %.2e, gradient gap %.2e "
                "(tolerance 1e-12)\n",
                window, chunk, fwd, bwd);
    EXPECT_LE(fwd, 1e-12);
    EXPECT_LE(bwd, 1e-12);
  }
}

TEST(Mamba2Reference, SsdMatchesRecurrenceAndFiniteDifferences) {
  const std::size_t L = 7, P = 3, N = 2;
  std::mt19937_64 rng(21);
  const std::vector<double> x = tm::random_values(L * P, -1, 1, rng);
  const std::vector<double> dt = tm::random_values(L, 0.1, 1.2, rng);
  const std::vector<double> B = tm::random_values(L * N, -1, 1, rng);
  const std::vector<double> C = tm::random_values(L * N, -1, 1, rng);
  const std::vector<double> dy = tm::random_values(L * P, -1, 1, rng);
  const double A = -0.8, D = 0.7;
  for (std::size_t chunk : {1, 2, 3, 7, 10}) {
    const ref::SsdShape shape{L, P, N, chunk};
    const std::vector<double> y = ref::ssd_forward(shape, x, dt, A, B, C, D);
    const std::vector<double> r = ref::ssd_recurrent_forward(shape, x, dt, A, B, C, D);
    const double gap = relative_gap(y, r);
    // packed [x | dt | A | B | C | D]
    std::vector<double> packed = x;
    packed.insert(packed.end(), dt.begin(), dt.end());
    packed.push_back(A);
    packed.insert(packed.end(), B.begin(), B.end());
    packed.insert(packed.end(), C.begin(), C.end());
    packed.push_back(D);
    const auto f = [&](std::span<const double> v) {
      const std::vector<double> out =
          ref::ssd_forward(shape, v.subspan(0, L * P), v.subspan(L * P, L), v[L * P + L],
                           v.subspan(L * P + L + 1, L * N), v.subspan(L * P + L + 1 + L * N, L * N),
                           v.back());
      double s = 0.0;
      for (std::size_t i = 0; i < out.size(); ++i) s += dy[i] * out[i];
      return s;
    };
    const ref::SsdGrads g = ref::ssd_backward(shape, x, dt, A, B, C, D, dy);
    std::vector<double> analytic = g.dx;
    analytic.insert(analytic.end(), g.ddt.begin(), g.ddt.end());
    analytic.push_back(g.dA);
    analytic.insert(analytic.end(), g.dB.begin(), g.dB.end());
    analytic.insert(analytic.end(), g.dC.begin(), g.dC.end());
    analytic.push_back(g.dD);
    const ref::GradientComparison c = ref::check_gradient(f, packed, analytic);
    std::printf("ssd chunk %zu: vs recurrence %.2e (tolerance 1e-12); backward vs finite "
                "differences max rel err %.2e (tolerance %.0e)\n",
                chunk, gap, c.max_rel_error, kFdTolerance);
    EXPECT_LE(gap, 1e-12);
    EXPECT_LE(c.max_rel_error, kFdTolerance) << "element " << c.worst_index;
  }
}

TEST(Mamba2Reference, ExponentArgumentsStayNonPositiveAtLargeDecay) {
  for (std::size_t chunk : {64, 2}) {
    ref::Mamba2Dims dims = tiny_dims(6, chunk);
    std::mt19937_64 rng(31);
    ref::Mamba2Params params = tm::random_params(dims, rng);
    for (auto& layer : params.layers) {
      for (double& v : layer.A_log) v = 6.0;    // A = -403
      for (double& v : layer.dt_bias) v = 3.0;  // dt ~ 3: a_t ~ -1200 per step
    }
    const std::vector<double> x = tm::random_values(2 * 6 * 3, -1, 1, rng);
    const std::vector<double> up = tm::random_values(2 * 2, -1, 1, rng);
    ref::ssd_reset_max_exponent();
    const std::vector<double> pred = ref::mamba2_forward(dims, params, x, 2);
    const ref::Mamba2Gradients g = ref::mamba2_backward(dims, params, x, 2, up);
    std::printf("chunk %zu: largest exponent argument %.3g\n", chunk, ref::ssd_max_exponent());
    EXPECT_LE(ref::ssd_max_exponent(), 0.0);
    for (double v : pred) EXPECT_TRUE(std::isfinite(v));
    for (double v : ref::mamba2_flatten(g.params)) ASSERT_TRUE(std::isfinite(v));
    for (double v : g.dx) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(Mamba2Reference, CausalConvBackwardMatchesFiniteDifferences) {
  const std::size_t batch = 2, L = 5, C = 3;
  for (std::size_t K : {1, 3, 4, 6}) {
    for (bool silu : {false, true}) {
      std::mt19937_64 rng(41 + K);
      const std::vector<double> u = tm::random_values(batch * L * C, -1, 1, rng);
      const std::vector<double> w = tm::random_values(C * K, -1, 1, rng);
      const std::vector<double> b = tm::random_values(C, -1, 1, rng);
      const std::vector<double> dy = tm::random_values(batch * L * C, -1, 1, rng);
      std::vector<double> packed = u;
      packed.insert(packed.end(), w.begin(), w.end());
      packed.insert(packed.end(), b.begin(), b.end());
      const auto f = [&](std::span<const double> v) {
        const std::vector<double> y = ref::causal_conv1d_forward(
            batch, L, C, K, v.subspan(0, u.size()), v.subspan(u.size(), w.size()),
            v.subspan(u.size() + w.size()), silu);
        double s = 0.0;
        for (std::size_t i = 0; i < y.size(); ++i) s += dy[i] * y[i];
        return s;
      };
      const ref::CausalConv1dGrads g = ref::causal_conv1d_backward(batch, L, C, K, u, w, b, silu, dy);
      std::vector<double> analytic = g.du;
      analytic.insert(analytic.end(), g.dweight.begin(), g.dweight.end());
      analytic.insert(analytic.end(), g.dbias.begin(), g.dbias.end());
      const ref::GradientComparison c = ref::check_gradient(f, packed, analytic);
      std::printf("conv K %zu silu %d: max rel err %.2e (tolerance %.0e)\n", K, silu ? 1 : 0,
                  c.max_rel_error, kFdTolerance);
      EXPECT_LE(c.max_rel_error, kFdTolerance);
    }
  }
}

// A negative control: a wrong SSD gradient (one row of dC zeroed) must fail the finite-difference
// check at the tolerance used above, so the check can fail.
TEST(Mamba2Reference, FiniteDifferenceCheckRejectsAWrongGradient) {
  const std::size_t L = 6, P = 2, N = 2;
  std::mt19937_64 rng(51);
  const std::vector<double> x = tm::random_values(L * P, -1, 1, rng);
  const std::vector<double> dt = tm::random_values(L, 0.1, 1.2, rng);
  const std::vector<double> B = tm::random_values(L * N, -1, 1, rng);
  const std::vector<double> C = tm::random_values(L * N, -1, 1, rng);
  const std::vector<double> dy = tm::random_values(L * P, -1, 1, rng);
  const ref::SsdShape single{L, P, N, L};
  ref::SsdGrads g = ref::ssd_backward(single, x, dt, -0.5, B, C, 1.0, dy);
  for (std::size_t n = 0; n < N; ++n) g.dC[(L - 1) * N + n] = 0.0;
  const auto f = [&](std::span<const double> c) {
    const std::vector<double> y = ref::ssd_forward(single, x, dt, -0.5, B, c, 1.0);
    double s = 0.0;
    for (std::size_t i = 0; i < y.size(); ++i) s += dy[i] * y[i];
    return s;
  };
  const ref::GradientComparison c = ref::check_gradient(f, C, g.dC);
  std::printf("wrong dC: max rel err %.2e (must exceed %.0e)\n", c.max_rel_error, kFdTolerance);
  EXPECT_GT(c.max_rel_error, kFdTolerance);
}

std::string validation_message(const resident::models::Mamba2Config& c,
                               const resident::models::ModelShape& s,
                               std::size_t limit = 232448) {
  try {
    resident::models::validate_mamba2_config(c, s, limit);
  } catch (const resident::Error& e) {
    return e.what();
  }
  return "";
}

TEST(Mamba2Config, ValidationNamesTheField) {
  using resident::models::Mamba2Config;
  const resident::models::ModelShape shape{};
  EXPECT_EQ(validation_message(Mamba2Config{}, shape), "");
  struct Case {
    Mamba2Config config;
    std::string field;
    std::size_t window = 64;
  };
  std::vector<Case> cases;
  Mamba2Config c;
  c = {};
  c.headdim = 24;  // d_inner 128
  cases.push_back({c, "headdim = 24 must divide d_inner"});
  c = {};
  c.d_conv = 9;
  cases.push_back({c, "d_conv = 9, allowed [1, 8]"});
  c = {};
  c.chunk = 0;
  cases.push_back({c, "chunk = 0, allowed [1, 128]"});
  c = {};
  c.d_model = 0;
  cases.push_back({c, "d_model = 0"});
  c = {};
  c.n_layers = 0;
  cases.push_back({c, "n_layers = 0"});
  c = {};
  c.d_state = 65;
  cases.push_back({c, "d_state = 65, allowed [1, 64]"});
  c = {};
  c.chunk = 128;
  c.headdim = 64;
  c.d_state = 64;
  cases.push_back({c, "min(chunk, window) = 128, headdim = 64, d_state = 64 need", 128});
  for (const Case& k : cases) {
    resident::models::ModelShape s = shape;
    s.window = k.window;
    const std::string message = validation_message(k.config, s);
    std::printf("%s\n", message.c_str());
    EXPECT_NE(message.find(k.field), std::string::npos) << message;
  }
  resident::models::ModelShape bad = shape;
  bad.window = 0;
  EXPECT_NE(validation_message(Mamba2Config{}, bad).find("shape.window = 0"), std::string::npos);
  bad = shape;
  bad.max_batch = 0;
  EXPECT_NE(validation_message(Mamba2Config{}, bad).find("shape.max_batch = 0"),
            std::string::npos);
}

}  // namespace
