#include "tests/reference/diffusion_reference.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "kernels/core/error.h"
#include "tests/reference/nn_reference.h"

namespace resident::reference {

namespace {

[[noreturn]] void fail(const std::string& detail, int line) {
  throw Error("diffusion_reference", "invalid argument", detail, __FILE__, line);
}

void require_size(const char* what, std::size_t got, std::size_t want, int line) {
  if (got != want)
    fail(std::string(what) + " has " + std::to_string(got) + " values, expected " +
             std::to_string(want),
         line);
}

using Vec = std::vector<double>;

// Everything the backward needs of one forward.
struct Trace {
  Vec sin, e1, e1a, temb, c1, c1a, cond, u;
  std::vector<Vec> h;  // h_0 .. h_blocks
  std::vector<Vec> ln, z, a;
  Vec eps_hat;
};

Vec columns(const Vec& m, std::size_t rows, std::size_t cols, std::size_t first,
            std::size_t count) {
  Vec out(rows * count);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < count; ++c) out[r * count + c] = m[r * cols + first + c];
  return out;
}

Trace run_forward(const DiffusionDims& d, const DiffusionParams& p, std::span<const double> x_t,
                  std::span<const std::size_t> t, std::span<const double> window,
                  std::size_t batch) {
  validate_diffusion_dims(d);
  const std::size_t D = d.width, O = d.outputs, flat = d.window * d.features;
  require_size("x_t", x_t.size(), batch * O, __LINE__);
  require_size("t", t.size(), batch, __LINE__);
  require_size("window", window.size(), batch * flat, __LINE__);
  Trace tr;
  tr.sin.resize(batch * d.time_dim);
  for (std::size_t b = 0; b < batch; ++b) {
    const Vec s = diffusion_time_sinusoid(d.time_dim, static_cast<double>(t[b]));
    std::copy(s.begin(), s.end(), tr.sin.begin() + static_cast<long>(b * d.time_dim));
  }
  tr.e1 = linear_forward({batch, d.time_dim, D}, tr.sin, p.time_fc1_weight, p.time_fc1_bias);
  tr.e1a = gelu_tanh_forward(tr.e1);
  tr.temb = linear_forward({batch, D, D}, tr.e1a, p.time_fc2_weight, p.time_fc2_bias);
  tr.c1 = linear_forward({batch, flat, D}, window, p.cond_fc1_weight, p.cond_fc1_bias);
  tr.c1a = silu_forward(tr.c1);
  tr.cond = linear_forward({batch, D, D}, tr.c1a, p.cond_fc2_weight, p.cond_fc2_bias);
  const std::size_t K = O + 2 * D;
  tr.u.assign(batch * K, 0.0);
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t o = 0; o < O; ++o) tr.u[b * K + o] = x_t[b * O + o];
    for (std::size_t j = 0; j < D; ++j) {
      tr.u[b * K + O + j] = tr.cond[b * D + j];
      tr.u[b * K + O + D + j] = tr.temb[b * D + j];
    }
  }
  tr.h.push_back(linear_forward({batch, K, D}, tr.u, p.input_weight, p.input_bias));
  for (std::size_t k = 0; k < d.blocks; ++k) {
    const DiffusionBlockParams& bp = p.blocks[k];
    tr.ln.push_back(
        layer_norm_forward(batch, D, tr.h[k], bp.norm_gamma, bp.norm_beta, kDiffusionLayerNormEps));
    Vec z = linear_forward({batch, D, D}, tr.ln[k], bp.fc1_weight, bp.fc1_bias);
    for (std::size_t i = 0; i < z.size(); ++i) z[i] += tr.temb[i];
    tr.a.push_back(silu_forward(z));
    tr.z.push_back(std::move(z));
    Vec h = linear_forward({batch, D, D}, tr.a[k], bp.fc2_weight, bp.fc2_bias);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] += tr.h[k][i];
    tr.h.push_back(std::move(h));
  }
  tr.eps_hat = linear_forward({batch, D, O}, tr.h[d.blocks], p.output_weight, p.output_bias);
  return tr;
}

}  // namespace

void validate_diffusion_dims(const DiffusionDims& d) {
  const auto at_least = [](const char* field, std::size_t v, std::size_t low, int line) {
    if (v < low)
      fail(std::string(field) + " = " + std::to_string(v) + ", allowed >= " + std::to_string(low),
           line);
  };
  at_least("window", d.window, 1, __LINE__);
  at_least("features", d.features, 1, __LINE__);
  at_least("outputs", d.outputs, 1, __LINE__);
  at_least("width", d.width, 1, __LINE__);
  at_least("blocks", d.blocks, 1, __LINE__);
  at_least("time_dim", d.time_dim, 4, __LINE__);
  if (d.time_dim % 2 != 0)
    fail("time_dim = " + std::to_string(d.time_dim) + ", allowed an even value", __LINE__);
}

DiffusionParams diffusion_zero_params(const DiffusionDims& d) {
  validate_diffusion_dims(d);
  const std::size_t D = d.width, O = d.outputs, flat = d.window * d.features;
  DiffusionParams p;
  p.time_fc1_weight.assign(D * d.time_dim, 0.0);
  p.time_fc1_bias.assign(D, 0.0);
  p.time_fc2_weight.assign(D * D, 0.0);
  p.time_fc2_bias.assign(D, 0.0);
  p.cond_fc1_weight.assign(D * flat, 0.0);
  p.cond_fc1_bias.assign(D, 0.0);
  p.cond_fc2_weight.assign(D * D, 0.0);
  p.cond_fc2_bias.assign(D, 0.0);
  p.input_weight.assign(D * (O + 2 * D), 0.0);
  p.input_bias.assign(D, 0.0);
  p.blocks.resize(d.blocks);
  for (DiffusionBlockParams& b : p.blocks) {
    b.norm_gamma.assign(D, 0.0);
    b.norm_beta.assign(D, 0.0);
    b.fc1_weight.assign(D * D, 0.0);
    b.fc1_bias.assign(D, 0.0);
    b.fc2_weight.assign(D * D, 0.0);
    b.fc2_bias.assign(D, 0.0);
  }
  p.output_weight.assign(O * D, 0.0);
  p.output_bias.assign(O, 0.0);
  return p;
}

std::vector<std::pair<std::string, std::vector<double>*>> diffusion_named_tensors(
    DiffusionParams& p) {
  std::vector<std::pair<std::string, std::vector<double>*>> out = {
      {"time.fc1.weight", &p.time_fc1_weight}, {"time.fc1.bias", &p.time_fc1_bias},
      {"time.fc2.weight", &p.time_fc2_weight}, {"time.fc2.bias", &p.time_fc2_bias},
      {"cond.fc1.weight", &p.cond_fc1_weight}, {"cond.fc1.bias", &p.cond_fc1_bias},
      {"cond.fc2.weight", &p.cond_fc2_weight}, {"cond.fc2.bias", &p.cond_fc2_bias},
      {"input.weight", &p.input_weight},       {"input.bias", &p.input_bias}};
  for (std::size_t k = 0; k < p.blocks.size(); ++k) {
    const std::string b = "block" + std::to_string(k) + ".";
    DiffusionBlockParams& bp = p.blocks[k];
    out.emplace_back(b + "norm.gamma", &bp.norm_gamma);
    out.emplace_back(b + "norm.beta", &bp.norm_beta);
    out.emplace_back(b + "fc1.weight", &bp.fc1_weight);
    out.emplace_back(b + "fc1.bias", &bp.fc1_bias);
    out.emplace_back(b + "fc2.weight", &bp.fc2_weight);
    out.emplace_back(b + "fc2.bias", &bp.fc2_bias);
  }
  out.emplace_back("output.weight", &p.output_weight);
  out.emplace_back("output.bias", &p.output_bias);
  return out;
}

std::vector<double> diffusion_time_sinusoid(std::size_t time_dim, double t) {
  const std::size_t half = time_dim / 2;
  Vec s(time_dim);
  for (std::size_t k = 0; k < half; ++k) {
    const double w =
        std::exp(-static_cast<double>(k) * std::log(1e4) / static_cast<double>(half - 1));
    s[k] = std::sin(t * w);
    s[half + k] = std::cos(t * w);
  }
  return s;
}

std::vector<double> diffusion_denoiser_forward(const DiffusionDims& dims,
                                               const DiffusionParams& params,
                                               std::span<const double> x_t,
                                               std::span<const std::size_t> t,
                                               std::span<const double> window, std::size_t batch) {
  return run_forward(dims, params, x_t, t, window, batch).eps_hat;
}

DiffusionGradients diffusion_denoiser_backward(const DiffusionDims& d, const DiffusionParams& p,
                                               std::span<const double> x_t,
                                               std::span<const std::size_t> t,
                                               std::span<const double> window, std::size_t batch,
                                               std::span<const double> d_eps_hat) {
  const Trace tr = run_forward(d, p, x_t, t, window, batch);
  const std::size_t D = d.width, O = d.outputs, flat = d.window * d.features, K = O + 2 * D;
  require_size("d_eps_hat", d_eps_hat.size(), batch * O, __LINE__);
  DiffusionGradients g;
  g.params = diffusion_zero_params(d);
  DiffusionParams& gp = g.params;
  const auto ow = GradMode::Overwrite;

  Vec dh(batch * D);
  linear_backward({batch, D, O}, tr.h[d.blocks], p.output_weight, d_eps_hat,
                  {dh, gp.output_weight, gp.output_bias}, ow);
  Vec dtemb(batch * D, 0.0);
  for (std::size_t k = d.blocks; k-- > 0;) {
    const DiffusionBlockParams& bp = p.blocks[k];
    DiffusionBlockParams& gb = gp.blocks[k];
    Vec da(batch * D), dz(batch * D), dln(batch * D), dh_prev(batch * D);
    linear_backward({batch, D, D}, tr.a[k], bp.fc2_weight, dh, {da, gb.fc2_weight, gb.fc2_bias},
                    ow);
    silu_backward(tr.z[k], da, dz, ow);
    for (std::size_t i = 0; i < dz.size(); ++i) dtemb[i] += dz[i];
    linear_backward({batch, D, D}, tr.ln[k], bp.fc1_weight, dz, {dln, gb.fc1_weight, gb.fc1_bias},
                    ow);
    layer_norm_backward(batch, D, tr.h[k], bp.norm_gamma, dln, kDiffusionLayerNormEps,
                        {dh_prev, gb.norm_gamma, gb.norm_beta}, ow);
    for (std::size_t i = 0; i < dh.size(); ++i) dh[i] += dh_prev[i];  // the residual path
  }
  Vec du(batch * K);
  linear_backward({batch, K, D}, tr.u, p.input_weight, dh, {du, gp.input_weight, gp.input_bias},
                  ow);
  g.dx_t = columns(du, batch, K, 0, O);
  const Vec dcond = columns(du, batch, K, O, D);
  const Vec du_temb = columns(du, batch, K, O + D, D);
  for (std::size_t i = 0; i < dtemb.size(); ++i) dtemb[i] += du_temb[i];

  Vec dc1a(batch * D), dc1(batch * D);
  linear_backward({batch, D, D}, tr.c1a, p.cond_fc2_weight, dcond,
                  {dc1a, gp.cond_fc2_weight, gp.cond_fc2_bias}, ow);
  silu_backward(tr.c1, dc1a, dc1, ow);
  g.dwindow.assign(batch * flat, 0.0);
  linear_backward({batch, flat, D}, window, p.cond_fc1_weight, dc1,
                  {g.dwindow, gp.cond_fc1_weight, gp.cond_fc1_bias}, ow);

  Vec de1a(batch * D), de1(batch * D);
  linear_backward({batch, D, D}, tr.e1a, p.time_fc2_weight, dtemb,
                  {de1a, gp.time_fc2_weight, gp.time_fc2_bias}, ow);
  gelu_tanh_backward(tr.e1, de1a, de1, ow);
  linear_backward({batch, d.time_dim, D}, tr.sin, p.time_fc1_weight, de1,
                  {{}, gp.time_fc1_weight, gp.time_fc1_bias}, ow);
  return g;
}

std::vector<double> diffusion_q_sample(const DiffusionQSample& q, std::span<const double> y,
                                       std::span<const std::size_t> t, std::span<const double> eps,
                                       std::size_t batch, std::size_t outputs) {
  require_size("y", y.size(), batch * outputs, __LINE__);
  require_size("eps", eps.size(), batch * outputs, __LINE__);
  require_size("t", t.size(), batch, __LINE__);
  Vec x(batch * outputs);
  for (std::size_t b = 0; b < batch; ++b) {
    if (t[b] >= q.sqrt_alpha_bar.size())
      fail("t[" + std::to_string(b) + "] = " + std::to_string(t[b]) + ", allowed < " +
               std::to_string(q.sqrt_alpha_bar.size()),
           __LINE__);
    for (std::size_t o = 0; o < outputs; ++o)
      x[b * outputs + o] = q.sqrt_alpha_bar[t[b]] * y[b * outputs + o] +
                           q.sqrt_one_minus_alpha_bar[t[b]] * eps[b * outputs + o];
  }
  return x;
}

double diffusion_training_loss(const DiffusionDims& d, const DiffusionParams& p,
                               const DiffusionQSample& q, std::span<const double> window,
                               std::span<const double> y, std::span<const std::size_t> t,
                               std::span<const double> eps, std::size_t batch) {
  const Vec x_t = diffusion_q_sample(q, y, t, eps, batch, d.outputs);
  const Vec e = diffusion_denoiser_forward(d, p, x_t, t, window, batch);
  double sum = 0.0;
  for (std::size_t i = 0; i < e.size(); ++i) sum += (e[i] - eps[i]) * (e[i] - eps[i]);
  return sum / static_cast<double>(e.size());
}

DiffusionGradients diffusion_training_loss_backward(
    const DiffusionDims& d, const DiffusionParams& p, const DiffusionQSample& q,
    std::span<const double> window, std::span<const double> y, std::span<const std::size_t> t,
    std::span<const double> eps, std::size_t batch) {
  const Vec x_t = diffusion_q_sample(q, y, t, eps, batch, d.outputs);
  const Vec e = diffusion_denoiser_forward(d, p, x_t, t, window, batch);
  Vec de(e.size());
  for (std::size_t i = 0; i < e.size(); ++i)
    de[i] = 2.0 * (e[i] - eps[i]) / static_cast<double>(e.size());
  DiffusionGradients g = diffusion_denoiser_backward(d, p, x_t, t, window, batch, de);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t o = 0; o < d.outputs; ++o) g.dx_t[b * d.outputs + o] *= q.sqrt_alpha_bar[t[b]];
  return g;
}

std::vector<double> diffusion_sampler_step(const DiffusionStepCoefficients& c,
                                           std::span<const double> x_t,
                                           std::span<const double> eps_hat,
                                           std::span<const double> z) {
  require_size("eps_hat", eps_hat.size(), x_t.size(), __LINE__);
  require_size("z", z.size(), x_t.size(), __LINE__);
  Vec out(x_t.size());
  for (std::size_t i = 0; i < x_t.size(); ++i) {
    const double x0 =
        c.sqrt_recip_alpha_bar * x_t[i] - c.sqrt_recip_alpha_bar_minus_one * eps_hat[i];
    out[i] = c.c1 * x0 + c.c2 * x_t[i] + (c.add_noise ? c.sigma * z[i] : 0.0);
  }
  return out;
}

DiffusionSummary diffusion_sample_summary(std::span<const double> samples, std::size_t windows,
                                          std::size_t samples_per_window, std::size_t outputs,
                                          std::span<const double> levels) {
  require_size("samples", samples.size(), windows * samples_per_window * outputs, __LINE__);
  const std::size_t S = samples_per_window, Q = levels.size();
  DiffusionSummary r;
  r.mean.assign(windows * outputs, 0.0);
  r.quantiles.assign(windows * outputs * Q, 0.0);
  for (std::size_t w = 0; w < windows; ++w)
    for (std::size_t o = 0; o < outputs; ++o) {
      Vec v(S);
      double sum = 0.0;
      for (std::size_t s = 0; s < S; ++s) {
        v[s] = samples[(w * S + s) * outputs + o];
        sum += v[s];
      }
      r.mean[w * outputs + o] = sum / static_cast<double>(S);
      std::sort(v.begin(), v.end());
      for (std::size_t k = 0; k < Q; ++k) {
        const double pos = levels[k] * static_cast<double>(S - 1);
        const auto lo = static_cast<std::size_t>(std::floor(pos));
        const std::size_t hi = std::min(lo + 1, S - 1);
        const double frac = pos - static_cast<double>(lo);
        r.quantiles[(w * outputs + o) * Q + k] = v[lo] + frac * (v[hi] - v[lo]);
      }
    }
  return r;
}

double diffusion_normal_from_bits(unsigned a, unsigned b) {
  const double u1 = (static_cast<double>(a) + 0.5) * 0x1p-32;
  const double u2 = static_cast<double>(b) * 0x1p-32;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

std::size_t diffusion_timestep_from_bits(unsigned a, std::size_t steps) {
  return static_cast<std::size_t>((static_cast<unsigned long long>(a) * steps) >> 32);
}

}  // namespace resident::reference
