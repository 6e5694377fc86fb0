// The weight initializers without a GPU: a seed names the same bits and another seed other bits;
// the uniform kinds stay inside their bounds and reach them; the sample mean and variance of every
// kind match its formula within 5 standard errors of a 10^6-element sample; orthogonal weights
// satisfy W W^T = gain^2 I (wide, square) or W^T W = gain^2 I (tall) to 1e-5 in float, and their
// entries are Haar distributed (the diag(R) > 0 sign convention); the values agree with the
// double-precision oracle of tests/reference; Mlp's default and PPO's orthogonal init reproduce
// the code they replaced bit for bit on the shapes this repository uses; every invalid argument
// throws resident::Error naming the field. Each statistical check has a negative control: a
// deliberately wrong fill that the same check must reject.
#include "lib/nn/initializers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/core/error.h"
#include "lib/nn/mlp.h"
#include "lib/nn/param_slab.h"
#include "tests/reference/nn_reference.h"

namespace {

using namespace resident;
using nn::Initializer;
using nn::InitializerKind;

constexpr double kStandardErrors = 5.0;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ----- the statistical checks (each returns what it measured, so a test can expect a failure)

// Sample mean against `mean`, standard error sqrt(variance / n) (variance: of one element).
struct MeanCheck {
  double sample_mean = 0, standard_error = 0, z = 0;
  bool passed() const { return std::abs(z) <= kStandardErrors; }
};
MeanCheck check_mean(std::span<const float> values, double mean, double variance) {
  double sum = 0;
  for (float v : values) sum += v;
  MeanCheck c;
  const double n = static_cast<double>(values.size());
  c.sample_mean = sum / n;
  c.standard_error = std::sqrt(variance / n);
  c.z = (c.sample_mean - mean) / c.standard_error;
  return c;
}

// Unbiased sample variance against `variance`; the standard error of a sample variance is
// sqrt((mu4 - sigma^4) / n) = sigma^2 sqrt((kurtosis - 1) / n), kurtosis = mu4 / sigma^4
// (3 for a normal, 9/5 for a uniform).
struct VarianceCheck {
  double sample_variance = 0, standard_error = 0, z = 0;
  bool passed() const { return std::abs(z) <= kStandardErrors; }
};
VarianceCheck check_variance(std::span<const float> values, double variance, double kurtosis) {
  const double n = static_cast<double>(values.size());
  double sum = 0;
  for (float v : values) sum += v;
  const double mean = sum / n;
  double squares = 0;
  for (float v : values) squares += (v - mean) * (v - mean);
  VarianceCheck c;
  c.sample_variance = squares / (n - 1);
  c.standard_error = variance * std::sqrt((kurtosis - 1.0) / n);
  c.z = (c.sample_variance - variance) / c.standard_error;
  return c;
}

// Every value in [low, high] (the float-rounded bounds) and the extremes within `reach` of them.
struct BoundsCheck {
  double min = 0, max = 0;
  bool inside = false, reached = false;
  bool passed() const { return inside && reached; }
};
BoundsCheck check_bounds(std::span<const float> values, double low, double high, double reach) {
  BoundsCheck c;
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  c.min = *lo;
  c.max = *hi;
  c.inside = c.min >= static_cast<float>(low) && c.max <= static_cast<float>(high);
  c.reached = c.min <= low + reach && c.max >= high - reach;
  return c;
}

// max |W W^T - gain^2 I| (rows <= cols) or max |W^T W - gain^2 I| (rows > cols), over gain^2;
// products in double from the float values.
double orthogonality_error(std::span<const float> w, std::size_t rows, std::size_t cols,
                           double gain) {
  const bool tall = rows > cols;
  const std::size_t k = tall ? cols : rows, n = tall ? rows : cols;
  auto at = [&](std::size_t vector, std::size_t e) -> double {
    return tall ? w[e * cols + vector] : w[vector * cols + e];
  };
  double worst = 0;
  for (std::size_t i = 0; i < k; ++i)
    for (std::size_t j = 0; j <= i; ++j) {
      double dot = 0;
      for (std::size_t e = 0; e < n; ++e) dot += at(i, e) * at(j, e);
      worst = std::max(worst, std::abs(dot / (gain * gain) - (i == j ? 1.0 : 0.0)));
    }
  return worst;
}

// ----- determinism

std::vector<Initializer> every_kind() {
  return {Initializer::constant(0.5),          Initializer::uniform(-0.5, 1.5),
          Initializer::normal(0.25, 2.0),      Initializer::xavier_uniform(),
          Initializer::xavier_normal(nn::tanh_gain), Initializer::kaiming_uniform(),
          Initializer::kaiming_normal(),       Initializer::orthogonal(nn::relu_gain)};
}

TEST(Initializers, SameSeedSameBitsOtherSeedOtherBits) {
  for (const Initializer& init : every_kind()) {
    for (const auto& [rows, cols] : {std::pair<std::size_t, std::size_t>{33, 17}, {17, 33}, {24, 24}}) {
      const auto a = nn::initial_values(init, rows, cols, 42);
      const auto b = nn::initial_values(init, rows, cols, 42);
      const auto c = nn::initial_values(init, rows, cols, 43);
      ASSERT_EQ(a.size(), rows * cols);
      EXPECT_TRUE(same_bits(a, b)) << init.describe() << " " << rows << "x" << cols;
      if (init.kind == InitializerKind::Constant) {
        EXPECT_TRUE(same_bits(a, c)) << "constant draws nothing";
        EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](float v) { return v == 0.5f; }));
      } else {
        // Another seed: (almost) every element differs, not just one.
        std::size_t differing = 0;
        for (std::size_t i = 0; i < a.size(); ++i) differing += a[i] != c[i];
        EXPECT_GT(differing, a.size() * 9 / 10) << init.describe() << " " << rows << "x" << cols;
      }
      // The seeded call is a fresh generator with that seed; the generator overload continues it.
      std::mt19937_64 rng(42);
      EXPECT_TRUE(same_bits(a, nn::initial_values(init, rows, cols, rng))) << init.describe();
      const auto next = nn::initial_values(init, rows, cols, rng);
      if (init.kind != InitializerKind::Constant) {
        EXPECT_FALSE(same_bits(a, next)) << init.describe() << ": the generator did not advance";
      }
    }
  }
}

// ----- bounds of the uniform kinds

struct UniformCase {
  Initializer init;
  std::size_t rows, cols;
  double low, high;  // by the formula
};

std::vector<UniformCase> uniform_cases() {
  return {
      {Initializer::uniform(-0.5, 1.5), 1000, 1000, -0.5, 1.5},
      {Initializer::xavier_uniform(), 700, 1300, -std::sqrt(6.0 / 2000), std::sqrt(6.0 / 2000)},
      {Initializer::kaiming_uniform(nn::relu_gain), 1000, 1000, -std::sqrt(6.0 / 1000),
       std::sqrt(6.0 / 1000)},
      {Initializer::kaiming_uniform(0.5), 3, 1, -0.5 * std::sqrt(3.0), 0.5 * std::sqrt(3.0)},
  };
}

TEST(Initializers, UniformKindsStayInsideTheirBoundsAndReachThem) {
  for (const UniformCase& c : uniform_cases()) {
    const auto values = nn::initial_values(c.init, c.rows, c.cols, 7);
    const std::size_t n = values.size();
    // P(no value within `reach` of a bound) = (1 - reach / width)^n = e^-20 at this reach.
    const double reach = n > 100 ? (c.high - c.low) * 20.0 / static_cast<double>(n) : c.high - c.low;
    const BoundsCheck check = check_bounds(values, c.low, c.high, reach);
    std::printf("%-40s [%g, %g]: min %.9g max %.9g (reach %.2g)\n", c.init.describe().c_str(),
                c.low, c.high, check.min, check.max, reach);
    EXPECT_TRUE(check.passed()) << c.init.describe();
    // Negative control: the bounds of a 1% narrower range must reject the same values.
    const double half = (c.high - c.low) / 2, middle = (c.high + c.low) / 2;
    if (n > 100) {
      EXPECT_FALSE(check_bounds(values, middle - 0.99 * half, middle + 0.99 * half, reach).passed())
          << c.init.describe();
    }
  }
}

// ----- sample mean and variance against the formula

struct MomentCase {
  Initializer init;
  std::size_t rows, cols;
  double mean, variance, kurtosis;
};

std::vector<MomentCase> moment_cases() {
  const double uniform = 9.0 / 5.0, normal = 3.0;
  return {
      {Initializer::uniform(-0.5, 1.5), 1000, 1000, 0.5, 4.0 / 12.0, uniform},
      {Initializer::normal(0.25, 2.0), 1000, 1000, 0.25, 4.0, normal},
      {Initializer::xavier_uniform(1.0), 700, 1300, 0.0, 2.0 / 2000.0, uniform},
      {Initializer::xavier_normal(nn::tanh_gain), 1300, 700, 0.0,
       nn::tanh_gain * nn::tanh_gain * 2.0 / 2000.0, normal},
      {Initializer::kaiming_uniform(nn::relu_gain), 1000, 1000, 0.0, 2.0 / 1000.0, uniform},
      {Initializer::kaiming_normal(nn::relu_gain), 500, 2000, 0.0, 2.0 / 2000.0, normal},
      {Initializer::kaiming_normal(1.0), 2000, 500, 0.0, 1.0 / 500.0, normal},
  };
}

TEST(Initializers, SampleMeanAndVarianceMatchTheFormula) {
  std::uint64_t seed = 2024;
  for (const MomentCase& c : moment_cases()) {
    const std::vector<float> values = nn::initial_values(c.init, c.rows, c.cols, seed++);
    const MeanCheck mean = check_mean(values, c.mean, c.variance);
    const VarianceCheck variance = check_variance(values, c.variance, c.kurtosis);
    std::printf("%-40s %zux%zu: mean %+.3e (expect %+.3e, z %+.2f), variance %.6e (expect %.6e, "
                "z %+.2f); tolerance %.0f standard errors\n",
                c.init.describe().c_str(), c.rows, c.cols, mean.sample_mean, c.mean, mean.z,
                variance.sample_variance, c.variance, variance.z, kStandardErrors);
    EXPECT_TRUE(mean.passed()) << c.init.describe() << ": mean z = " << mean.z;
    EXPECT_TRUE(variance.passed()) << c.init.describe() << ": variance z = " << variance.z;

    // Negative controls. Scaled by 1.02 about the mean (4% more variance): the variance check
    // must reject it, the mean check need not.
    std::vector<float> scaled(values);
    for (float& v : scaled) v = static_cast<float>(c.mean + 1.02 * (v - c.mean));
    const VarianceCheck wrong_variance = check_variance(scaled, c.variance, c.kurtosis);
    EXPECT_FALSE(wrong_variance.passed())
        << c.init.describe() << ": a 1.02x scaled fill passed the variance check (z "
        << wrong_variance.z << ")";
    // Shifted by 0.02 standard deviations: the mean check must reject it.
    std::vector<float> shifted(values);
    for (float& v : shifted) v = static_cast<float>(v + 0.02 * std::sqrt(c.variance));
    const MeanCheck wrong_mean = check_mean(shifted, c.mean, c.variance);
    EXPECT_FALSE(wrong_mean.passed())
        << c.init.describe() << ": a shifted fill passed the mean check (z " << wrong_mean.z << ")";
  }
}

// Orthogonal: the mean of the entries is 0 with the standard error of an independent sample of
// variance gain^2 / max(rows, cols) (exact for a Haar Q: 1^T Q 1 has variance min(rows, cols));
// the mean square is gain^2 / max(rows, cols) exactly (min(rows, cols) unit vectors).
TEST(Initializers, OrthogonalMeanAndMeanSquareMatchTheFormula) {
  for (const auto& [rows, cols, gain] :
       {std::tuple<std::size_t, std::size_t, double>{1000, 1000, 1.0}, {1500, 400, nn::relu_gain},
        {300, 2000, 0.01}}) {
    const auto values = nn::initial_values(Initializer::orthogonal(gain), rows, cols, 99);
    const double variance = gain * gain / static_cast<double>(std::max(rows, cols));
    const MeanCheck mean = check_mean(values, 0.0, variance);
    double squares = 0;
    for (float v : values) squares += static_cast<double>(v) * v;
    const double mean_square = squares / static_cast<double>(values.size());
    const double relative = std::abs(mean_square / variance - 1.0);
    std::printf("orthogonal %zux%zu gain %g: mean %+.3e (z %+.2f), mean square %.9e (expect %.9e, "
                "relative error %.2e, tol 1e-6)\n",
                rows, cols, gain, mean.sample_mean, mean.z, mean_square, variance, relative);
    EXPECT_TRUE(mean.passed()) << "z = " << mean.z;
    EXPECT_LE(relative, 1e-6);
    // Negative control: shifted by 0.02 standard deviations.
    std::vector<float> shifted(values);
    for (float& v : shifted) v = static_cast<float>(v + 0.02 * std::sqrt(variance));
    EXPECT_FALSE(check_mean(shifted, 0.0, variance).passed());
  }
}

// Haar distribution of one entry over many seeds: Q[0][0] and Q[n-1][n-1] of an n x n orthogonal
// matrix are coordinates of a uniform unit vector, mean 0, variance 1/n, kurtosis 3n / (n + 2).
// A QR without the sign correction (Householder, as LAPACK returns it) gives Q[0][0] < 0 always;
// the negative control, |Q[0][0]|, must fail the mean check.
TEST(Initializers, OrthogonalEntriesAreHaarDistributed) {
  constexpr std::size_t n = 8, seeds = 20000;
  const double variance = 1.0 / n, kurtosis = 3.0 * n / (n + 2.0);
  std::vector<float> first(seeds), last(seeds), uncorrected(seeds);
  for (std::size_t s = 0; s < seeds; ++s) {
    const auto q = nn::initial_values(Initializer::orthogonal(), n, n, 1000 + s);
    first[s] = q[0];
    last[s] = q[n * n - 1];
    uncorrected[s] = -std::abs(q[0]);
  }
  auto check_entry = [&](const char* name, const std::vector<float>& sample) {
    const MeanCheck mean = check_mean(sample, 0.0, variance);
    const VarianceCheck var = check_variance(sample, variance, kurtosis);
    std::printf("%s of %zux%zu over %zu seeds: mean %+.4f (z %+.2f), variance %.5f (expect %.5f, "
                "z %+.2f)\n",
                name, n, n, seeds, mean.sample_mean, mean.z, var.sample_variance, variance, var.z);
    EXPECT_TRUE(mean.passed()) << name;
    EXPECT_TRUE(var.passed()) << name;
  };
  check_entry("Q[0][0]", first);
  check_entry("Q[n-1][n-1]", last);
  const MeanCheck wrong = check_mean(uncorrected, 0.0, variance);
  EXPECT_FALSE(wrong.passed()) << "an uncorrected-sign Q[0][0] passed the mean check (z " << wrong.z
                               << ")";
  // Negative control of the variance check: the entry of a gain-1.05 matrix.
  std::vector<float> scaled(first);
  for (float& v : scaled) v *= 1.05f;
  const VarianceCheck wrong_variance = check_variance(scaled, variance, kurtosis);
  EXPECT_FALSE(wrong_variance.passed()) << "z " << wrong_variance.z;
}

// ----- orthogonality

TEST(Initializers, OrthogonalRowsOrColumnsAreOrthonormalTimesGain) {
  struct Shape {
    std::size_t rows, cols;
  };
  const Shape shapes[] = {{1, 1},  {7, 7},    {64, 64},  {256, 256}, {1, 7},  {3, 64},
                          {64, 256}, {100, 513}, {7, 1}, {256, 64}, {513, 100}};
  for (const Shape& s : shapes) {
    for (const double gain : {1.0, nn::relu_gain, 0.01}) {
      const auto w = nn::initial_values(Initializer::orthogonal(gain), s.rows, s.cols, 5);
      const double error = orthogonality_error(w, s.rows, s.cols, gain);
      std::printf("orthogonal %3zux%-3zu gain %-6g: max |%s - I| = %.2e (tol 1e-5, %.0f%% used)\n",
                  s.rows, s.cols, gain, s.rows > s.cols ? "W^T W / g^2" : "W W^T / g^2", error,
                  100.0 * error / 1e-5);
      EXPECT_LT(error, 1e-5) << s.rows << "x" << s.cols << " gain " << gain;
    }
    // Negative controls: a Gaussian fill of the same scale, a wrong gain (1.001), one element
    // perturbed by 1e-4.
    if (std::min(s.rows, s.cols) > 1) {
      const auto gaussian = nn::initial_values(
          Initializer::normal(0.0, 1.0 / std::sqrt(static_cast<double>(std::max(s.rows, s.cols)))),
          s.rows, s.cols, 5);
      EXPECT_GE(orthogonality_error(gaussian, s.rows, s.cols, 1.0), 1e-5);
    }
    const auto w = nn::initial_values(Initializer::orthogonal(1.0), s.rows, s.cols, 5);
    EXPECT_GE(orthogonality_error(w, s.rows, s.cols, 1.001), 1e-5);
    auto perturbed = w;
    perturbed[perturbed.size() / 2] += 1e-4f;
    EXPECT_GE(orthogonality_error(perturbed, s.rows, s.cols, 1.0), 1e-5);
  }
}

// ----- against the double-precision oracle (tests/reference/nn_reference_init.cpp)

TEST(Initializers, AgreeWithTheReference) {
  constexpr std::size_t rows = 37, cols = 53;
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    std::vector<double> ref(rows * cols);
    auto compare_exact = [&](const Initializer& init, auto fill) {
      std::mt19937_64 rng(seed);
      fill(rng);
      const auto values = nn::initial_values(init, rows, cols, seed);
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < values.size(); ++i)
        mismatches += values[i] != static_cast<float>(ref[i]);
      EXPECT_EQ(mismatches, 0u) << init.describe() << " seed " << seed;
    };
    compare_exact(Initializer::uniform(-2, 3),
                  [&](std::mt19937_64& r) { reference::init_uniform(ref, -2, 3, r); });
    compare_exact(Initializer::normal(1, 0.5),
                  [&](std::mt19937_64& r) { reference::init_normal(ref, 1, 0.5, r); });
    compare_exact(Initializer::xavier_uniform(1.5), [&](std::mt19937_64& r) {
      reference::init_xavier_uniform(ref, rows, cols, 1.5, r);
    });
    compare_exact(Initializer::xavier_normal(1.5), [&](std::mt19937_64& r) {
      reference::init_xavier_normal(ref, rows, cols, 1.5, r);
    });
    compare_exact(Initializer::kaiming_uniform(1.5), [&](std::mt19937_64& r) {
      reference::init_kaiming_uniform(ref, rows, cols, 1.5, r);
    });
    compare_exact(Initializer::kaiming_normal(1.5), [&](std::mt19937_64& r) {
      reference::init_kaiming_normal(ref, rows, cols, 1.5, r);
    });
    // Orthogonal: the same draws; the reference runs Gram-Schmidt twice, so agreement to rounding.
    for (const auto& [r, c] : {std::pair<std::size_t, std::size_t>{rows, cols}, {cols, rows}, {31, 31}}) {
      std::vector<double> q(r * c);
      std::mt19937_64 rng(seed);
      reference::init_orthogonal(q, r, c, 2.0, rng);
      const auto values = nn::initial_values(Initializer::orthogonal(2.0), r, c, seed);
      double worst = 0;
      for (std::size_t i = 0; i < q.size(); ++i)
        worst = std::max(worst, std::abs(static_cast<double>(values[i]) - q[i]));
      EXPECT_LT(worst, 1e-6) << "orthogonal " << r << "x" << c << " seed " << seed;
    }
  }
}

// ----- the code this replaced (frozen copies of Mlp::init_parameters' loop and PPO's
// orthogonal_matrix as they were before lib/nn/initializers), to pin that the values did not move

std::vector<std::vector<float>> former_mlp_weights(const std::vector<std::size_t>& widths,
                                                   std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<float>> out;
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    const std::size_t in = widths[l], out_width = widths[l + 1];
    const double bound = std::sqrt(6.0 / static_cast<double>(in));
    std::uniform_real_distribution<double> value(-bound, bound);
    std::vector<float> weight(in * out_width);
    for (float& w : weight) w = static_cast<float>(value(rng));
    out.push_back(std::move(weight));
  }
  return out;
}

std::vector<float> former_ppo_orthogonal(std::size_t rows, std::size_t cols, double gain,
                                         std::mt19937_64& rng) {
  const bool tall = rows >= cols;
  const std::size_t length = tall ? rows : cols, count = tall ? cols : rows;
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<std::vector<double>> q(count, std::vector<double>(length));
  for (auto& v : q)
    for (double& x : v) x = normal(rng);
  for (std::size_t i = 0; i < count; ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      double dot = 0.0;
      for (std::size_t k = 0; k < length; ++k) dot += q[i][k] * q[j][k];
      for (std::size_t k = 0; k < length; ++k) q[i][k] -= dot * q[j][k];
    }
    double norm = 0.0;
    for (double x : q[i]) norm += x * x;
    norm = std::sqrt(norm);
    for (double& x : q[i]) x /= norm;
  }
  std::vector<float> out(rows * cols);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      out[r * cols + c] = static_cast<float>(gain * (tall ? q[c][r] : q[r][c]));
  return out;
}

// Mlp's default weight_init drawn as init_parameters draws it (one generator, layer by layer).
// Its bound gain * sqrt(3 / in) can differ from the former sqrt(6 / in) in the last bit of the
// double, which moves a float only if the value lies within that bit of a float rounding boundary.
TEST(Initializers, MlpDefaultReproducesTheFormerInit) {
  const std::vector<std::vector<std::size_t>> widths = {
      {64, 256, 256, 3}, {4, 64, 64, 2},  {4, 128, 128, 2}, {4, 128, 128, 3},
      {1, 1},            {3, 5, 7, 2},     {17, 33, 1},      {100, 100, 100, 100}};
  std::size_t compared = 0, differing = 0;
  for (const auto& w : widths) {
    for (std::uint64_t seed = 0; seed < 20; ++seed) {
      const auto former = former_mlp_weights(w, seed);
      std::mt19937_64 rng(seed);
      for (std::size_t l = 0; l + 1 < w.size(); ++l) {
        const auto now = nn::initial_values(nn::MlpConfig{}.weight_init, w[l + 1], w[l], rng);
        compared += now.size();
        for (std::size_t i = 0; i < now.size(); ++i) differing += now[i] != former[l][i];
      }
    }
  }
  std::printf("Mlp default init vs the former loop: %zu of %zu floats differ\n", differing,
              compared);
  EXPECT_EQ(differing, 0u);
}

// PPO's actor (4-64-64-2) and critic (4-64-64-1) with CleanRL's gains, from one generator.
TEST(Initializers, PpoOrthogonalReproducesTheFormerInit) {
  const std::vector<std::size_t> actor = {4, 64, 64, 2}, critic = {4, 64, 64, 1};
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    std::mt19937_64 former_rng(seed), rng(seed);
    for (const auto* widths : {&actor, &critic}) {
      for (std::size_t l = 0; l + 1 < widths->size(); ++l) {
        const bool head = l + 2 == widths->size();
        const double gain = !head ? std::sqrt(2.0) : (widths == &actor ? 0.01 : 1.0);
        const auto former = former_ppo_orthogonal((*widths)[l + 1], (*widths)[l], gain, former_rng);
        const auto now =
            nn::initial_values(Initializer::orthogonal(gain), (*widths)[l + 1], (*widths)[l], rng);
        EXPECT_TRUE(same_bits(former, now)) << "seed " << seed << " layer " << l;
      }
    }
  }
}

// ----- invalid arguments

// Runs `make`, expects a resident::Error whose message names every string in `names`.
template <class Make>
void expect_rejected(Make make, std::initializer_list<const char*> names) {
  try {
    make();
    ADD_FAILURE() << "no error; expected one naming " << *names.begin();
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const char* name : names)
      EXPECT_NE(message.find(name), std::string::npos) << "'" << name << "' not in: " << message;
    EXPECT_NE(message.find("allowed"), std::string::npos) << message;
  }
}

TEST(Initializers, InvalidArgumentsAreRejectedNamingTheField) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const double huge = std::numeric_limits<double>::max();
  expect_rejected([&] { Initializer::constant(nan); }, {"constant", "value = nan"});
  expect_rejected([&] { Initializer::constant(-inf); }, {"value = -inf"});
  expect_rejected([] { Initializer::uniform(1, 1); }, {"uniform", "low = 1", "high = 1", "low < high"});
  expect_rejected([] { Initializer::uniform(2, 1); }, {"low = 2", "high = 1"});
  expect_rejected([&] { Initializer::uniform(nan, 1); }, {"low = nan"});
  expect_rejected([&] { Initializer::uniform(0, inf); }, {"high = inf"});
  expect_rejected([&] { Initializer::uniform(-huge, huge); }, {"high - low = inf"});
  expect_rejected([] { Initializer::normal(0, 0); }, {"normal", "stddev = 0", "> 0"});
  expect_rejected([] { Initializer::normal(0, -1); }, {"stddev = -1"});
  expect_rejected([&] { Initializer::normal(0, inf); }, {"stddev = inf"});
  expect_rejected([&] { Initializer::normal(nan, 1); }, {"mean = nan"});
  using Factory = Initializer (*)(double);
  for (const auto& [name, factory] :
       {std::pair<const char*, Factory>{"xavier_uniform", &Initializer::xavier_uniform},
        {"xavier_normal", &Initializer::xavier_normal},
        {"kaiming_uniform", &Initializer::kaiming_uniform},
        {"kaiming_normal", &Initializer::kaiming_normal},
        {"orthogonal", &Initializer::orthogonal}}) {
    expect_rejected([&] { factory(0.0); }, {name, "gain = 0", "> 0"});
    expect_rejected([&] { factory(-1.0); }, {name, "gain = -1"});
    expect_rejected([&] { factory(nan); }, {name, "gain = nan"});
    expect_rejected([&] { factory(inf); }, {name, "gain = inf"});
  }
  // Fields set by hand are validated by initial_values too.
  Initializer hand{.kind = InitializerKind::Normal, .mean = 0.0, .stddev = -2.0};
  expect_rejected([&] { nn::initial_values(hand, 2, 2, 1); }, {"stddev = -2"});
  hand = {.kind = InitializerKind::KaimingUniform, .gain = 0.0};
  expect_rejected([&] { nn::initial_values(hand, 2, 2, 1); }, {"kaiming_uniform", "gain = 0"});
  hand = {.kind = static_cast<InitializerKind>(99)};
  expect_rejected([&] { nn::initial_values(hand, 2, 2, 1); }, {"kind = 99"});
  // Shapes.
  for (const Initializer& init : every_kind()) {
    expect_rejected([&] { nn::initial_values(init, 0, 3, 1); }, {"fan_out = 0"});
    expect_rejected([&] { nn::initial_values(init, 3, 0, 1); }, {"fan_in = 0"});
    const std::size_t big = std::size_t{1} << 33;
    expect_rejected([&] { nn::initial_values(init, big, big, 1); }, {"fan_out * fan_in"});
  }
}

TEST(Initializers, SlabTensorFansAndMlpConfigAreChecked) {
  nn::ParamSlab slab;
  slab.add("w", {6, 4}, true);
  slab.add("k", {8, 3, 5}, true);
  slab.add("b", {6}, false);
  const auto kaiming = Initializer::kaiming_uniform();
  EXPECT_EQ(nn::tensor_fans(slab, "w", kaiming).fan_out, 6u);
  EXPECT_EQ(nn::tensor_fans(slab, "w", kaiming).fan_in, 4u);
  EXPECT_EQ(nn::tensor_fans(slab, "k", kaiming).fan_in, 15u);
  EXPECT_EQ(nn::tensor_fans(slab, "b", Initializer::constant(0.1)).fan_out, 6u);
  EXPECT_EQ(nn::tensor_fans(slab, "b", Initializer::constant(0.1)).fan_in, 1u);
  expect_rejected([&] { nn::tensor_fans(slab, "b", kaiming); }, {"\"b\"", "rank 1"});
  expect_rejected([&] { nn::tensor_fans(slab, "b", Initializer::orthogonal()); }, {"rank 1"});

  // Mlp validates its weight_init at construction (no device work before finalize()).
  nn::ParamSlab mlp_slab;
  nn::MlpConfig config{.widths = {3, 2}};
  EXPECT_EQ(config.weight_init.kind, InitializerKind::KaimingUniform);
  EXPECT_EQ(config.weight_init.gain, std::sqrt(2.0));
  config.weight_init = {.kind = InitializerKind::Orthogonal, .gain = -1.0};
  expect_rejected([&] { nn::Mlp mlp(config, 4, mlp_slab); }, {"orthogonal", "gain = -1"});
}

}  // namespace
