// CPU tests of the diffusion forecaster (no GPU): the double reference's
// denoiser backward (every parameter tensor, x_t and the history window) and
// the training loss's backward (every parameter tensor, the target and the
// window) against central finite differences, with a negative control; the
// schedules against closed forms (linear endpoints, the cosine alpha_bar, the
// posterior-mean identity, c1 and c2 as the posterior mean's coefficients); the
// sampler step and the sample summary on hand-checked values; DiffusionConfig
// validation errors that name the field.
#include "tests/reference/diffusion_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "lib/models/diffusion/diffusion_config.h"
#include "lib/models/diffusion/diffusion_init.h"
#include "lib/models/diffusion/diffusion_schedule.h"
#include "tests/reference/finite_difference.h"

namespace {

namespace ref = resident::reference;
namespace rm = resident::models;

std::vector<double> uniform_values(std::size_t n, double low, double high, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(low, high);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

std::size_t parameter_count(const ref::DiffusionDims& d) {
  ref::DiffusionParams p = ref::diffusion_zero_params(d);
  std::size_t n = 0;
  for (const auto& [name, t] : ref::diffusion_named_tensors(p)) n += t->size();
  return n;
}

ref::DiffusionParams unpack(const ref::DiffusionDims& d, std::span<const double> flat) {
  ref::DiffusionParams p = ref::diffusion_zero_params(d);
  std::size_t at = 0;
  for (auto& [name, t] : ref::diffusion_named_tensors(p))
    for (double& v : *t) v = flat[at++];
  return p;
}

std::vector<double> pack(ref::DiffusionParams& p) {
  std::vector<double> flat;
  for (auto& [name, t] : ref::diffusion_named_tensors(p))
    flat.insert(flat.end(), t->begin(), t->end());
  return flat;
}

// Parameters U(-0.5, 0.5) with LayerNorm gamma around 1; then the data part.
std::vector<double> random_params(const ref::DiffusionDims& d, std::mt19937_64& rng) {
  ref::DiffusionParams p = ref::diffusion_zero_params(d);
  for (auto& [name, t] : ref::diffusion_named_tensors(p)) {
    *t = uniform_values(t->size(), -0.5, 0.5, rng);
    if (name.ends_with("norm.gamma"))
      for (double& g : *t) g += 1.0;
  }
  return pack(p);
}

struct Case {
  const char* name;
  ref::DiffusionDims dims;
  std::size_t batch;
};

ref::DiffusionDims dims_of(std::size_t L, std::size_t F, std::size_t O, std::size_t D,
                           std::size_t blocks, std::size_t time_dim) {
  ref::DiffusionDims d;
  d.window = L;
  d.features = F;
  d.outputs = O;
  d.width = D;
  d.blocks = blocks;
  d.time_dim = time_dim;
  return d;
}

const Case kCases[] = {
    {"L 3 F 2 O 2 D 5, 2 blocks", dims_of(3, 2, 2, 5, 2, 4), 3},
    {"L 1 F 1 O 1 D 4, 1 block, batch 1", dims_of(1, 1, 1, 4, 1, 4), 1},
    {"L 2 F 3 O 3 D 6, 3 blocks, Ts 8", dims_of(2, 3, 3, 6, 3, 8), 2},
};

constexpr double kTolerance = 1e-6;  // on the max relative error (floor 1e-3)
constexpr std::size_t kSteps = 20;

std::vector<std::size_t> random_timesteps(std::size_t batch, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::size_t> u(0, kSteps - 1);
  std::vector<std::size_t> t(batch);
  for (std::size_t& v : t) v = u(rng);
  return t;
}

void report(const char* what, const char* name, std::size_t n, const ref::GradientComparison& r) {
  std::printf(
      "    %-10s %-38s %4zu values, max rel error %.2e (%5.1f%% of "
      "%.0e), max abs %.2e\n",
      what, name, n, r.max_rel_error, 100.0 * r.max_rel_error / kTolerance, kTolerance,
      r.max_abs_error);
}

TEST(DiffusionReference, DenoiserBackwardMatchesFiniteDifferences) {
  for (const Case& c : kCases) {
    std::mt19937_64 rng(5);
    const std::size_t count = parameter_count(c.dims), O = c.dims.outputs;
    const std::size_t flat = c.dims.window * c.dims.features;
    std::vector<double> packed = random_params(c.dims, rng);
    const std::vector<double> x_t = uniform_values(c.batch * O, -1.5, 1.5, rng);
    const std::vector<double> win = uniform_values(c.batch * flat, -1.5, 1.5, rng);
    packed.insert(packed.end(), x_t.begin(), x_t.end());
    packed.insert(packed.end(), win.begin(), win.end());
    const std::vector<std::size_t> t = random_timesteps(c.batch, rng);
    const auto split = [&](std::span<const double> v) {
      return std::tuple{unpack(c.dims, v.first(count)), v.subspan(count, c.batch * O),
                        v.subspan(count + c.batch * O)};
    };
    auto forward = [&](std::span<const double> v) {
      auto [p, xt, w] = split(v);
      return ref::diffusion_denoiser_forward(c.dims, p, xt, t, w, c.batch);
    };
    auto backward = [&](std::span<const double> v, std::span<const double> dy) {
      auto [p, xt, w] = split(v);
      ref::DiffusionGradients g =
          ref::diffusion_denoiser_backward(c.dims, p, xt, t, w, c.batch, dy);
      std::vector<double> grad = pack(g.params);
      grad.insert(grad.end(), g.dx_t.begin(), g.dx_t.end());
      grad.insert(grad.end(), g.dwindow.begin(), g.dwindow.end());
      return grad;
    };
    const ref::GradientComparison r = ref::check_backward(forward, backward, packed, 99);
    report("denoiser", c.name, packed.size(), r);
    EXPECT_LE(r.max_rel_error, kTolerance)
        << c.name << ": worst element " << r.worst_index << " analytic " << r.analytic_at_worst
        << " numeric " << r.numeric_at_worst;
  }
}

struct LossPoint {
  std::vector<double> packed;  // [params | y | window]
  std::vector<std::size_t> t;
  std::vector<double> eps;
};

LossPoint loss_point(const Case& c, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  LossPoint p;
  p.packed = random_params(c.dims, rng);
  const std::vector<double> y = uniform_values(c.batch * c.dims.outputs, -1.5, 1.5, rng);
  const std::vector<double> w =
      uniform_values(c.batch * c.dims.window * c.dims.features, -1.5, 1.5, rng);
  p.packed.insert(p.packed.end(), y.begin(), y.end());
  p.packed.insert(p.packed.end(), w.begin(), w.end());
  p.t = random_timesteps(c.batch, rng);
  std::normal_distribution<double> n;
  p.eps.resize(c.batch * c.dims.outputs);
  for (double& e : p.eps) e = n(rng);
  return p;
}

ref::GradientComparison check_loss(const Case& c, const LossPoint& point,
                                   const std::vector<std::size_t>& backward_t,
                                   const rm::DiffusionScheduleTable& s) {
  const std::size_t count = parameter_count(c.dims), O = c.dims.outputs;
  const ref::DiffusionQSample q{s.sqrt_alpha_bar, s.sqrt_one_minus_alpha_bar};
  const auto parts = [&](std::span<const double> v) {
    return std::tuple{unpack(c.dims, v.first(count)), v.subspan(count, c.batch * O),
                      v.subspan(count + c.batch * O)};
  };
  auto loss = [&](std::span<const double> v) {
    auto [p, y, w] = parts(v);
    return ref::diffusion_training_loss(c.dims, p, q, w, y, point.t, point.eps, c.batch);
  };
  auto [p, y, w] = parts(point.packed);
  ref::DiffusionGradients g =
      ref::diffusion_training_loss_backward(c.dims, p, q, w, y, backward_t, point.eps, c.batch);
  std::vector<double> grad = pack(g.params);
  grad.insert(grad.end(), g.dx_t.begin(), g.dx_t.end());
  grad.insert(grad.end(), g.dwindow.begin(), g.dwindow.end());
  return ref::check_gradient(loss, point.packed, grad);
}

TEST(DiffusionReference, TrainingLossBackwardMatchesFiniteDifferences) {
  for (const rm::DiffusionSchedule kind :
       {rm::DiffusionSchedule::Linear, rm::DiffusionSchedule::Cosine}) {
    const rm::DiffusionScheduleTable s =
        rm::make_diffusion_schedule(kind, kSteps, rm::DiffusionVariance::FixedSmall);
    for (const Case& c : kCases) {
      const LossPoint point = loss_point(c, 17);
      const ref::GradientComparison r = check_loss(c, point, point.t, s);
      report(std::string(rm::diffusion_schedule_name(kind)).c_str(), c.name, point.packed.size(),
             r);
      EXPECT_LE(r.max_rel_error, kTolerance)
          << c.name << ": worst element " << r.worst_index << " analytic " << r.analytic_at_worst
          << " numeric " << r.numeric_at_worst;
    }
  }
}

TEST(DiffusionReference, GradientCheckRejectsAWrongBackward) {
  // Negative control: the backward evaluated at other timesteps than the loss
  // (t + 1).
  const rm::DiffusionScheduleTable s = rm::make_diffusion_schedule(
      rm::DiffusionSchedule::Cosine, kSteps, rm::DiffusionVariance::FixedSmall);
  const Case& c = kCases[0];
  const LossPoint point = loss_point(c, 17);
  std::vector<std::size_t> shifted = point.t;
  for (std::size_t& t : shifted) t = (t + 1) % kSteps;
  const ref::GradientComparison r = check_loss(c, point, shifted, s);
  std::printf("    backward at t + 1: max rel error %.2e\n", r.max_rel_error);
  EXPECT_GT(r.max_rel_error, 1e-2);
}

TEST(DiffusionReference, TimeSinusoidMatchesItsFormula) {
  const std::vector<double> s = ref::diffusion_time_sinusoid(8, 3.0);
  // half = 4: w_k = 1e4^(-k/3).
  for (std::size_t k = 0; k < 4; ++k) {
    const double w = std::pow(1e4, -static_cast<double>(k) / 3.0);
    EXPECT_NEAR(s[k], std::sin(3.0 * w), 1e-14);
    EXPECT_NEAR(s[4 + k], std::cos(3.0 * w), 1e-14);
  }
}

TEST(DiffusionSchedule, LinearMatchesItsEndpointsAndProducts) {
  const std::size_t T = 200;
  const rm::DiffusionScheduleTable s = rm::make_diffusion_schedule(
      rm::DiffusionSchedule::Linear, T, rm::DiffusionVariance::FixedSmall);
  ASSERT_EQ(s.steps(), T);
  EXPECT_NEAR(s.beta[0], 1e-4 * 1000.0 / T, 1e-15);
  EXPECT_NEAR(s.beta[T - 1], 0.02 * 1000.0 / T, 1e-15);
  EXPECT_NEAR(s.beta[1] - s.beta[0], (0.1 - 5e-4) / (T - 1), 1e-15);
  double product = 1.0;
  for (std::size_t t = 0; t < T; ++t) {
    product *= 1.0 - s.beta[t];
    EXPECT_NEAR(s.alpha_bar[t], product, 1e-15);
  }
  EXPECT_LT(s.alpha_bar[T - 1], 1e-3);  // x_T is nearly pure noise
  EXPECT_EQ(s.alpha_bar_prev[0], 1.0);
  EXPECT_EQ(s.posterior_variance[0], 0.0);
}

TEST(DiffusionSchedule, CosineMatchesTheClosedForm) {
  const std::size_t T = 200;
  const rm::DiffusionScheduleTable s = rm::make_diffusion_schedule(
      rm::DiffusionSchedule::Cosine, T, rm::DiffusionVariance::FixedLarge);
  const auto f = [&](double u) {
    const double c = std::cos((u / T + 0.008) / 1.008 * std::numbers::pi / 2.0);
    return c * c;
  };
  std::size_t clipped = 0;
  for (std::size_t t = 0; t < T; ++t) {
    if (s.beta[t] == 0.999) {
      ++clipped;
      continue;
    }
    // Unclipped steps: alpha_bar_t = f(t + 1) / f(0) (the product telescopes).
    if (clipped == 0) {
      EXPECT_NEAR(s.alpha_bar[t], f(static_cast<double>(t) + 1.0) / f(0.0), 1e-12) << t;
    }
    EXPECT_GE(s.beta[t], 0.0);
    EXPECT_NEAR(s.sigma[t], std::sqrt(s.beta[t]), 1e-15);  // FixedLarge
  }
  EXPECT_EQ(clipped, 1u);  // only the last step reaches the clip (f(T) ~ 0)
  EXPECT_EQ(s.beta[T - 1], 0.999);
}

TEST(DiffusionSchedule, PosteriorMeanCoefficientsAreConsistent) {
  // With x_t = sqrt(ab_t) x0 + sqrt(1 - ab_t) eps, x0_hat from the true eps is
  // x0, and the posterior mean c1 x0 + c2 x_t; its variance identity: c1
  // sqrt(ab_{t-1})... checked as
  //   mu(x0, x_t) = sqrt(ab_{t-1}) x0 + sqrt(1 - ab_{t-1} - beta~_t) * eps when
  //   x_t is built from x0 and eps (DDIM's form at eta = 1), for every t > 0.
  for (const rm::DiffusionSchedule kind :
       {rm::DiffusionSchedule::Linear, rm::DiffusionSchedule::Cosine}) {
    const rm::DiffusionScheduleTable s =
        rm::make_diffusion_schedule(kind, 50, rm::DiffusionVariance::FixedSmall);
    for (std::size_t t = 1; t + 1 < 50; ++t) {
      const double x0 = 0.7, eps = -1.3;
      const double x_t = s.sqrt_alpha_bar[t] * x0 + s.sqrt_one_minus_alpha_bar[t] * eps;
      const double x0_hat =
          s.sqrt_recip_alpha_bar[t] * x_t - s.sqrt_recip_alpha_bar_minus_one[t] * eps;
      EXPECT_NEAR(x0_hat, x0, 1e-12);
      const double mu = s.c1[t] * x0 + s.c2[t] * x_t;
      const double ddim = std::sqrt(s.alpha_bar_prev[t]) * x0 +
                          std::sqrt(1.0 - s.alpha_bar_prev[t] - s.posterior_variance[t]) * eps;
      EXPECT_NEAR(mu, ddim, 1e-10) << rm::diffusion_schedule_name(kind) << " t " << t;
      EXPECT_NEAR(s.sigma[t] * s.sigma[t], s.posterior_variance[t], 1e-15);
    }
  }
}

TEST(DiffusionReference, SamplerStepAndSummary) {
  const ref::DiffusionStepCoefficients c{2.0, 0.5, 0.25, 0.75, 0.1, true};
  const std::vector<double> x{1.0, -2.0}, e{0.5, 1.0}, z{1.0, -1.0};
  const std::vector<double> out = ref::diffusion_sampler_step(c, x, e, z);
  // x0 = 2 x - 0.5 e: 1.75, -4.5; out = 0.25 x0 + 0.75 x + 0.1 z.
  EXPECT_NEAR(out[0], 0.25 * 1.75 + 0.75 + 0.1, 1e-15);
  EXPECT_NEAR(out[1], 0.25 * -4.5 - 1.5 - 0.1, 1e-15);
  const ref::DiffusionStepCoefficients last{2.0, 0.5, 0.25, 0.75, 0.1, false};
  EXPECT_NEAR(ref::diffusion_sampler_step(last, x, e, z)[0], 0.25 * 1.75 + 0.75, 1e-15);

  // One window, 5 samples of 1 output: 3, 1, 4, 1, 5 -> sorted 1 1 3 4 5.
  const std::vector<double> samples{3, 1, 4, 1, 5}, levels{0.0, 0.5, 0.9, 1.0};
  const ref::DiffusionSummary s = ref::diffusion_sample_summary(samples, 1, 5, 1, levels);
  EXPECT_DOUBLE_EQ(s.mean[0], 2.8);
  EXPECT_DOUBLE_EQ(s.quantiles[0], 1.0);
  EXPECT_DOUBLE_EQ(s.quantiles[1], 3.0);
  EXPECT_NEAR(s.quantiles[2], 4.0 + 0.6 * 1.0, 1e-15);  // position 3.6
  EXPECT_DOUBLE_EQ(s.quantiles[3], 5.0);
}

TEST(DiffusionReference, DrawsFromBits) {
  EXPECT_EQ(ref::diffusion_timestep_from_bits(0u, 200), 0u);
  EXPECT_EQ(ref::diffusion_timestep_from_bits(0xFFFFFFFFu, 200), 199u);
  EXPECT_EQ(ref::diffusion_timestep_from_bits(0x80000000u, 200), 100u);
  EXPECT_NEAR(ref::diffusion_normal_from_bits(0x7FFFFFFFu, 0u), std::sqrt(2.0 * std::log(2.0)),
              1e-8);
}

std::string config_error(const rm::DiffusionConfig& config, const rm::ModelShape& shape) {
  try {
    rm::validate_diffusion_config(config, shape);
  } catch (const resident::Error& e) {
    return e.what();
  }
  return "";
}

TEST(DiffusionConfig, DefaultsAreTheSmallConfig) {
  const rm::DiffusionConfig c;
  EXPECT_EQ(c.steps, 200u);
  EXPECT_EQ(c.width, 256u);
  EXPECT_EQ(c.blocks, 3u);
  EXPECT_EQ(c.schedule, rm::DiffusionSchedule::Linear);
  EXPECT_EQ(config_error(c, rm::ModelShape{}), "");
  EXPECT_EQ(rm::diffusion_schedule_from_name("linear"), rm::DiffusionSchedule::Linear);
  EXPECT_THROW(rm::diffusion_schedule_from_name("quadratic"), resident::Error);
  EXPECT_EQ(rm::diffusion_variance_from_name("fixedlarge"), rm::DiffusionVariance::FixedLarge);
  EXPECT_THROW(rm::diffusion_variance_from_name("learned"), resident::Error);
}

TEST(DiffusionConfig, ErrorsNameTheField) {
  const rm::ModelShape shape{64, 32, 1, 256};
  const auto expect = [&](const rm::DiffusionConfig& c, const rm::ModelShape& s,
                          const std::string& text) {
    const std::string e = config_error(c, s);
    EXPECT_NE(e.find(text), std::string::npos) << "expected '" << text << "' in: " << e;
  };
  rm::DiffusionConfig c;
  c.steps = 1;
  expect(c, shape, "steps = 1");
  c = {};
  c.time_dim = 7;
  expect(c, shape, "time_dim = 7");
  c = {};
  c.samples = 65;
  expect(c, shape, "samples = 65");
  c = {};
  c.quantiles = {0.5, 1.5};
  expect(c, shape, "quantiles[1] = 1.5");
  c = {};
  c.width = 0;
  expect(c, shape, "width = 0");
  rm::ModelShape bad = shape;
  bad.outputs = 65;
  expect(rm::DiffusionConfig{}, bad, "shape.outputs = 65");
  bad = shape;
  bad.max_batch = 0;
  expect(rm::DiffusionConfig{}, bad, "shape.max_batch = 0");
}

TEST(DiffusionInit, TensorsMatchTheReferenceNamesAndShapes) {
  const rm::DiffusionConfig c{.steps = 10, .width = 5, .blocks = 2, .time_dim = 4};
  const rm::ModelShape shape{3, 2, 2, 4};
  ref::DiffusionParams p = ref::diffusion_zero_params(dims_of(3, 2, 2, 5, 2, 4));
  const auto named = ref::diffusion_named_tensors(p);
  const std::vector<rm::DiffusionTensorSpec> specs = rm::diffusion_tensor_specs(c, shape);
  ASSERT_EQ(specs.size(), named.size());
  const auto values = rm::diffusion_initial_values(c, shape, 3);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(specs[i].name, named[i].first);
    std::size_t n = 1;
    for (std::size_t e : specs[i].shape) n *= e;
    EXPECT_EQ(n, named[i].second->size()) << specs[i].name;
    EXPECT_EQ(values[i].size(), n) << specs[i].name;
  }
  EXPECT_EQ(values, rm::diffusion_initial_values(c, shape, 3));  // seeded
  EXPECT_NE(values, rm::diffusion_initial_values(c, shape, 4));
}

}  // namespace
